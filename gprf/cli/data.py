"""Regression data for ``gprf compare``: the bundled default, CSV files, and the train/test split."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from gprf.cli.options import CLIError

MISSING_TOKENS = frozenset({"", "na", "nan", "n/a", "null", "none", "?"})


@dataclass(frozen=True)
class Dataset:
    """Raw inputs ``x`` (n, d) and targets ``y`` (n,) as float64 arrays, with column names."""

    name: str
    x: np.ndarray
    y: np.ndarray
    input_names: tuple[str, ...]
    target_name: str
    notes: tuple[str, ...] = field(default=())

    @property
    def num_rows(self) -> int:
        return self.x.shape[0]

    @property
    def num_inputs(self) -> int:
        return self.x.shape[1]


def _load_diabetes() -> Dataset:
    from sklearn.datasets import load_diabetes

    bunch = load_diabetes()
    return Dataset(
        name="diabetes (scikit-learn, bundled)",
        x=np.asarray(bunch.data, dtype=np.float64),
        y=np.asarray(bunch.target, dtype=np.float64),
        input_names=tuple(bunch.feature_names),
        target_name="disease progression",
    )


#: Datasets shipped with an installed dependency (no download), by ``--data`` name.
BUILTIN_DATASETS = {"diabetes": _load_diabetes}
DEFAULT_DATASET = "diabetes"


def _parse_float(token: str) -> float | None:
    """The float in ``token``; ``nan`` for a missing-value token; ``None`` if it is not a number."""
    token = token.strip()
    if token.lower() in MISSING_TOKENS:
        return math.nan
    try:
        return float(token)
    except ValueError:
        return None


def load_csv(path: str | Path, target: str | None) -> Dataset:
    """A CSV file with a header row; ``target`` names the regression target column.

    Every other numeric column is an input; columns with non-numeric entries are ignored (with a note),
    and rows with missing values (empty, ``NA``, ``nan``, ``?``, ...) are dropped (with a note).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as err:
        raise CLIError(f"argument --data: cannot read {str(path)!r}: {err.strerror or err}") from None
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = [row for row in csv.reader(text.splitlines(), dialect) if any(cell.strip() for cell in row)]
    if len(rows) < 2:
        raise CLIError(f"argument --data: {str(path)!r} needs a header row and at least one data row")
    header = [name.strip() for name in rows[0]]
    body = rows[1:]
    if target is None:
        raise CLIError(f"--data needs --target COLUMN; available columns: {', '.join(header)}")
    if target not in header:
        raise CLIError(
            f"argument --target: no column {target!r} in {str(path)!r}; available columns: {', '.join(header)}"
        )
    for line_number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise CLIError(
                f"argument --data: line {line_number} of {str(path)!r} has {len(row)} fields, "
                f"the header has {len(header)}"
            )

    columns: dict[str, np.ndarray] = {}
    ignored = []
    for j, name in enumerate(header):
        values = [_parse_float(row[j]) for row in body]
        bad = next((i for i, v in enumerate(values) if v is None), None)
        if bad is not None:
            if name == target:
                raise CLIError(
                    f"argument --target: column {target!r} is not numeric (line {bad + 2}: {body[bad][j]!r})"
                )
            ignored.append(name)
            continue
        columns[name] = np.asarray(values, dtype=np.float64)
    input_names = tuple(name for name in columns if name != target)
    if not input_names:
        raise CLIError(f"argument --data: {str(path)!r} has no numeric input columns besides the target {target!r}")

    x = np.stack([columns[name] for name in input_names], axis=-1)
    y = columns[target]
    notes = []
    if ignored:
        notes.append(f"ignored non-numeric column(s): {', '.join(ignored)}")
    complete = np.isfinite(x).all(-1) & np.isfinite(y)
    if not complete.all():
        notes.append(f"dropped {int((~complete).sum())} row(s) with missing or infinite values")
        x, y = x[complete], y[complete]
    return Dataset(path.name, x, y, input_names, target, tuple(notes))


def load_dataset(data: str | None, target: str | None) -> Dataset:
    """``--data``/``--target``: a built-in dataset name (default ``diabetes``) or a CSV path."""
    if data is None or (data in BUILTIN_DATASETS and not Path(data).exists()):
        if target is not None:
            raise CLIError("argument --target: only used with --data FILE.csv (built-in datasets have a fixed target)")
        return BUILTIN_DATASETS[data or DEFAULT_DATASET]()
    if not Path(data).is_file():
        raise CLIError(
            f"argument --data: no such file {data!r} (built-in datasets: {', '.join(sorted(BUILTIN_DATASETS))})"
        )
    return load_csv(data, target)


@dataclass(frozen=True)
class Split:
    """Standardised train/test tensors (statistics from the training rows only)."""

    train_x: Tensor
    train_y: Tensor
    test_x: Tensor
    test_y: Tensor
    y_mean: float
    y_std: float


def split_dataset(
    data: Dataset,
    test_fraction: float,
    seed: int,
    max_train: int | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float64,
) -> Split:
    """Seeded random split, capped at ``max_train`` training rows, standardised by the training statistics.

    Constant input columns keep a unit scale; a constant target is an error.
    """
    n = data.num_rows
    num_test = max(1, int(round(test_fraction * n)))
    if n - num_test < 2:
        raise CLIError(f"the data has {n} usable row(s); need at least 2 training rows and 1 test row")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).numpy()
    test_idx, train_idx = order[:num_test], order[num_test:]
    if max_train is not None:
        train_idx = train_idx[:max_train]
    x_train, y_train = data.x[train_idx], data.y[train_idx]
    x_mean, x_std = x_train.mean(0), x_train.std(0)
    x_std = np.where(x_std > 0, x_std, 1.0)
    y_mean, y_std = float(y_train.mean()), float(y_train.std())
    if not y_std > 0:
        raise CLIError(f"the target {data.target_name!r} is constant on the training rows; nothing to regress")

    def to_tensor(array: np.ndarray) -> Tensor:
        return torch.as_tensor(array, dtype=dtype, device=device)

    return Split(
        train_x=to_tensor((x_train - x_mean) / x_std),
        train_y=to_tensor((y_train - y_mean) / y_std),
        test_x=to_tensor((data.x[test_idx] - x_mean) / x_std),
        test_y=to_tensor((data.y[test_idx] - y_mean) / y_std),
        y_mean=y_mean,
        y_std=y_std,
    )
