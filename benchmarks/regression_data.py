"""Datasets of ``--what regression``: a folder of ``<name>.npz``/``<name>.csv`` files, or the bundled
default, subsampled and split into standardised training and test tensors.

* ``<name>.npz``: arrays ``x`` of shape ``(n, d)`` and ``y`` of shape ``(n,)`` (or ``(n, 1)``); other arrays (such
  as a predefined split mask) are ignored, since the benchmark draws its own split of its subsample;
* ``<name>.csv``: a header row, the target in the last column, read by :func:`gprf.cli.data.load_csv`.

Rows with missing or infinite values are dropped, with a note in the report naming their columns; complex or
text arrays, ``x`` without columns and unreadable archives are refused with an error naming the array.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import zipfile
import zlib
from pathlib import Path

import numpy as np
import torch

from gprf.cli.data import (
    BUILTIN_DATASETS,
    DEFAULT_DATASET,
    Dataset,
    Split,
    drop_incomplete_rows,
    load_csv,
    split_dataset,
)
from gprf.cli.options import CLIError

#: File types a data folder may hold, in order of preference when a name has both.
SUFFIXES = (".npz", ".csv")
#: Fraction of the (subsampled) rows held out for testing.
TEST_FRACTION = 0.1


def dataset_files(data_dir: str | Path) -> dict[str, Path]:
    """``{name: file}`` of every ``.npz``/``.csv`` file in ``data_dir``, sorted by name (``.npz`` wins a tie)."""
    folder = Path(data_dir)
    if not folder.is_dir():
        raise CLIError(f"argument --data-dir: no such folder {str(data_dir)!r}")
    files: dict[str, Path] = {}
    for suffix in reversed(SUFFIXES):  # the preferred suffix is written last and wins
        for path in folder.glob(f"*{suffix}"):
            if path.is_file():
                files[path.stem] = path
    if not files:
        raise CLIError(f"argument --data-dir: {str(data_dir)!r} holds no .npz or .csv files")
    return dict(sorted(files.items()))


def _read_npz(path: Path, keys: tuple[str, ...]) -> tuple[list[str], dict[str, np.ndarray]]:
    """The names of every array in the archive at ``path`` and the arrays among ``keys`` that it holds."""
    try:
        # The file is opened here: numpy leaves its own handle open when a damaged archive fails to open.
        with path.open("rb") as handle:
            archive = np.load(handle, allow_pickle=False)
            if isinstance(archive, np.lib.npyio.NpzFile):
                with archive:
                    return archive.files, {key: archive[key] for key in keys if key in archive.files}
    # Unreadable, truncated or corrupt; zipfile raises RuntimeError for an entry flagged as encrypted and
    # NotImplementedError (a RuntimeError) for a damaged version, flag or compression field of the central directory.
    except (OSError, ValueError, EOFError, RuntimeError, zipfile.BadZipFile, zlib.error) as err:
        raise CLIError(f"argument --data-dir: cannot read {path.name} as an .npz file: {err}") from None
    raise CLIError(
        f"argument --data-dir: {path.name} holds one .npy array, not an .npz archive of x and y (numpy.savez)"
    )


def _real_values(array: np.ndarray, key: str, path: Path) -> np.ndarray:
    """``array`` as float64; complex, text and other non-real arrays are refused (a cast would drop the imaginary
    part, or fail with numpy's message), and so are values beyond the float64 range (a cast makes them infinite)."""
    if array.dtype.kind not in "biuf":
        fix = "store real and imaginary parts as separate columns" if array.dtype.kind == "c" else "convert it"
        raise CLIError(
            f"argument --data-dir: {path.name}: array {key!r} has dtype {array.dtype}, not real numbers; {fix}"
        )
    with np.errstate(over="ignore"):
        values = array.astype(np.float64)
    if (np.isinf(values) & np.isfinite(array)).any():
        raise CLIError(f"argument --data-dir: {path.name}: array {key!r} holds values beyond the float64 range")
    return values


def load_npz(path: str | Path) -> Dataset:
    """Arrays ``x`` (n, d) and ``y`` (n,) of an ``.npz`` file, rows with non-finite values dropped."""
    path = Path(path)
    names, arrays = _read_npz(path, ("x", "y"))
    x, y = (_real_values(arrays[key], key, path) if key in arrays else None for key in ("x", "y"))
    if x is None or y is None:
        missing = ", ".join(key for key, array in (("x", x), ("y", y)) if array is None)
        raise CLIError(
            f"argument --data-dir: {path.name} lacks array(s) {missing}; it needs x of shape (n, d) and y of shape "
            f"(n,) (it has {', '.join(names) or 'none'})"
        )
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise CLIError(
            f"argument --data-dir: {path.name} has x of shape {x.shape} and y of shape {y.shape}; "
            "it needs x of shape (n, d) and y of shape (n,)"
        )
    if x.shape[1] == 0:
        raise CLIError(f"argument --data-dir: {path.name} has x of shape {x.shape}: no input columns (it needs d >= 1)")
    names = tuple(f"x{j}" for j in range(x.shape[1]))
    x, y, notes = drop_incomplete_rows(x, y, names, "y")
    return Dataset(path.stem, x, y, names, "y", notes)


def _last_column(path: Path) -> str:
    """The name of the last column in the header row of the CSV file ``path``."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            head = handle.read(4096)
    except OSError as err:
        raise CLIError(f"argument --data-dir: cannot read {path.name}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise CLIError(
            f"argument --data-dir: {path.name} is not UTF-8 text ({err.reason} at byte {err.start})"
        ) from None
    try:
        dialect = csv.Sniffer().sniff(head, delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    header = next(csv.reader(head.splitlines(), dialect), [])
    if not header or not header[-1].strip():
        raise CLIError(f"argument --data-dir: {path.name} needs a header row naming its columns (target last)")
    return header[-1].strip()


def load_table(path: str | Path) -> Dataset:
    """An ``.npz`` or ``.csv`` file of the data folder (CSV: target in the last column)."""
    path = Path(path)
    if path.suffix == ".npz":
        return load_npz(path)
    target = _last_column(path)  # its errors already name --data-dir and the file
    try:
        data = load_csv(path, target)
    except CLIError as err:  # load_csv speaks of --data/--target; here the file comes from --data-dir
        message = str(err).removeprefix("argument --data: ").removeprefix("argument --target: ")
        raise CLIError(f"argument --data-dir: {path.name}: {message}") from None
    return dataclasses.replace(data, name=path.stem)


def load_datasets(data_dir: str | None, names: list[str] | None) -> list[Dataset]:
    """``--data-dir``/``--datasets``: the named files of the folder (default: all of them), or without a folder
    the bundled default dataset (``--datasets`` may then name the built-in datasets)."""
    if data_dir is None:
        names = names or [DEFAULT_DATASET]
        unknown = [name for name in names if name not in BUILTIN_DATASETS]
        if unknown:
            raise CLIError(
                f"argument --datasets: no built-in dataset {', '.join(map(repr, unknown))} "
                f"(built-in: {', '.join(sorted(BUILTIN_DATASETS))}); give --data-dir DIR for files <name>.npz/.csv"
            )
        return [dataclasses.replace(BUILTIN_DATASETS[name](), name=name) for name in names]
    files = dataset_files(data_dir)
    names = names or list(files)
    unknown = [name for name in names if name not in files]
    if unknown:
        raise CLIError(
            f"argument --datasets: no file {', '.join(f'{name}.npz/.csv' for name in unknown)} in {data_dir!r}; "
            f"available: {', '.join(files)}"
        )
    return [load_table(files[name]) for name in names]


def dataset_names(text: str) -> list[str]:
    """argparse type of ``--datasets``: comma-separated names, duplicates dropped."""
    names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if not names:
        raise argparse.ArgumentTypeError("expected comma-separated dataset names, got none")
    return names


def subsample(data: Dataset, max_rows: int, seed: int) -> Dataset:
    """A seeded random subset of ``max_rows`` rows (all rows, in their order, when there are no more)."""
    if data.num_rows <= max_rows:
        return data
    generator = torch.Generator().manual_seed(seed)
    rows = torch.randperm(data.num_rows, generator=generator)[:max_rows].sort().values.numpy()
    note = f"subsampled {max_rows} of {data.num_rows} rows"
    return dataclasses.replace(data, x=data.x[rows], y=data.y[rows], notes=(*data.notes, note))


def regression_split(
    data: Dataset, max_rows: int, seed: int, device: torch.device, dtype: torch.dtype
) -> tuple[Dataset, Split]:
    """The subsample of ``max_rows`` rows and its seeded 90/10 train/test split, standardised by the training
    statistics (:func:`gprf.cli.data.split_dataset`)."""
    sample = subsample(data, max_rows, seed)
    if sample.num_rows < 10:
        raise CLIError(f"dataset {data.name!r} has {sample.num_rows} usable row(s); the benchmark needs at least 10")
    return sample, split_dataset(sample, TEST_FRACTION, seed, device=device, dtype=dtype)
