"""Regression data for ``gprf compare``: the bundled default, CSV files, and the train/test split."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from importlib import resources
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
    """The diabetes data of Efron, Hastie, Johnstone & Tibshirani (2004, *Least Angle Regression*), shipped with
    gprf as ``gprf/cli/diabetes.csv``: ten baseline variables of 442 patients (age, sex, body mass index, mean
    blood pressure, six blood serum measurements) in their original units, and a measure of disease progression one
    year later (the last column)."""
    with resources.files("gprf.cli").joinpath("diabetes.csv").open(encoding="utf-8") as table:
        names = table.readline().rstrip("\n").split(",")
        values = np.loadtxt(table, delimiter=",", dtype=np.float64, ndmin=2)
    return Dataset(
        name="diabetes (Efron et al. 2004, bundled)",
        x=values[:, :-1],
        y=values[:, -1],
        input_names=tuple(names[:-1]),
        target_name=names[-1],
    )


#: Datasets shipped with gprf (no download), by ``--data`` name.
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


def _numeric_column(name: str, cells: list[str], is_target: bool) -> np.ndarray | None:
    """The float64 values of one CSV column, or ``None`` for a text input column (no numeric entry at all).

    Raises :class:`CLIError` for a target with a text entry, an input column mixing numbers and text (one
    mistyped entry must not silently drop the whole column), and a number beyond the float64 range (which
    ``float`` would turn into an infinity, and the row into a dropped one).
    """
    values = [_parse_float(cell) for cell in cells]
    text_rows = [row for row, value in enumerate(values) if value is None]
    if is_target and text_rows:
        row = text_rows[0]
        raise CLIError(f"argument --target: column {name!r} is not numeric (line {row + 2}: {cells[row]!r})")
    if len(text_rows) == len(values):
        return None
    if text_rows:
        row = text_rows[0]
        raise CLIError(
            f"argument --data: column {name!r} mixes numbers and text (line {row + 2}: {cells[row]!r}); correct "
            "the entry, or write NA for a missing value"
        )
    for row, value in enumerate(values):
        if math.isinf(value) and cells[row].strip().lower().lstrip("+-") not in ("inf", "infinity"):
            raise CLIError(
                f"argument --data: column {name!r} line {row + 2}: {cells[row].strip()!r} is beyond the float64 "
                f"range (magnitudes up to {np.finfo(np.float64).max:.4g})"
            )
    return np.asarray(values, dtype=np.float64)


def drop_incomplete_rows(
    x: np.ndarray, y: np.ndarray, input_names: tuple[str, ...], target_name: str
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """``x`` and ``y`` without the rows holding NaN or infinite values, and a note naming the columns they were in
    (no note when every row is complete)."""
    finite = np.isfinite(np.concatenate([x, y[:, None]], axis=-1))
    complete = finite.all(-1)
    if complete.all():
        return x, y, ()
    columns = [name for name, ok in zip((*input_names, target_name), finite.all(0), strict=True) if not ok]
    note = f"dropped {int((~complete).sum())} row(s) with missing or infinite values (in {', '.join(columns)})"
    return x[complete], y[complete], (note,)


def load_csv(path: str | Path, target: str | None) -> Dataset:
    """A CSV file with a header row; ``target`` names the regression target column.

    Every other numeric column is an input; text columns (no numeric entry) are ignored (with a note), and rows
    with missing values (empty, ``NA``, ``nan``, ``?``, ...) or infinities are dropped (with a note naming the
    columns). Duplicate column names, a column mixing numbers and text and numbers beyond the float64 range are
    errors naming the column.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as err:
        raise CLIError(f"argument --data: cannot read {str(path)!r}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise CLIError(f"argument --data: {str(path)!r} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = [row for row in csv.reader(text.splitlines(), dialect) if any(cell.strip() for cell in row)]
    if len(rows) < 2:
        raise CLIError(f"argument --data: {str(path)!r} needs a header row and at least one data row")
    header = [name.strip() for name in rows[0]]
    body = rows[1:]
    duplicates = list(dict.fromkeys(name for index, name in enumerate(header) if name in header[:index]))
    if duplicates:
        raise CLIError(
            f"argument --data: the header of {str(path)!r} names column(s) {', '.join(map(repr, duplicates))} more "
            "than once; give every column a distinct name"
        )
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
        values = _numeric_column(name, [row[j] for row in body], is_target=name == target)
        if values is None:
            ignored.append(name)
        else:
            columns[name] = values
    input_names = tuple(name for name in columns if name != target)
    if not input_names:
        raise CLIError(f"argument --data: {str(path)!r} has no numeric input columns besides the target {target!r}")

    x = np.stack([columns[name] for name in input_names], axis=-1)
    notes = (f"ignored non-numeric column(s): {', '.join(ignored)}",) if ignored else ()
    x, y, dropped = drop_incomplete_rows(x, columns[target], input_names, target)
    return Dataset(path.name, x, y, input_names, target, (*notes, *dropped))


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


@dataclass(frozen=True)
class Standardiser:
    r"""Per-column :math:`(v - \mu) / \sigma` with the mean and (population) standard deviation of the rows it
    was fitted on, all computed on :math:`v / s` with :math:`s = \max |v|` per column.

    The squares of values near the float64 limit (:math:`|v| > 10^{154}`) overflow, which would make
    :math:`\sigma` infinite and every standardised value zero; on :math:`v / s \in [-1, 1]` they cannot.
    """

    scale: np.ndarray
    scaled_mean: np.ndarray
    scaled_std: np.ndarray

    @classmethod
    def fit(cls, rows: np.ndarray, constant_scale: float = 0.0) -> Standardiser:
        """The statistics of ``rows`` (n, d); a constant column gets the standard deviation ``constant_scale``."""
        scale = np.abs(rows).max(0)
        scale = np.where(scale > 0, scale, 1.0)
        scaled = rows / scale
        scaled_std = scaled.std(0)
        scaled_std = np.where(scaled_std > 0, scaled_std, constant_scale / scale)
        return cls(scale, scaled.mean(0), scaled_std)

    @property
    def mean(self) -> np.ndarray:
        return self.scaled_mean * self.scale

    @property
    def std(self) -> np.ndarray:
        return self.scaled_std * self.scale

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):  # a value beyond float64 becomes inf, which the caller reports
            return (rows / self.scale - self.scaled_mean) / self.scaled_std


def split_dataset(
    data: Dataset,
    test_fraction: float,
    seed: int,
    max_train: int | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float64,
) -> Split:
    """Seeded random split, capped at ``max_train`` training rows, standardised by the training statistics.

    Constant input columns keep a unit scale; a constant target is an error, and so is a standardised value that
    ``dtype`` cannot hold (a test value very far outside the training rows).
    """
    n = data.num_rows
    num_test = max(1, int(round(test_fraction * n)))
    if n - num_test < 2:
        raise CLIError(f"the data has {n} usable row(s); need at least 2 training rows and 1 test row")
    if max_train is not None and max_train < 2:
        raise CLIError(
            f"argument --max-train: at least 2 training rows are needed (a mean and a spread), got {max_train}"
        )
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).numpy()
    test_idx, train_idx = order[:num_test], order[num_test:]
    if max_train is not None:
        train_idx = train_idx[:max_train]
    x_scaler = Standardiser.fit(data.x[train_idx], constant_scale=1.0)
    y_scaler = Standardiser.fit(data.y[train_idx, None])
    if not y_scaler.std[0] > 0:
        raise CLIError(f"the target {data.target_name!r} is constant on the training rows; nothing to regress")
    columns = (*data.input_names, data.target_name)

    def standardised(scaler: Standardiser, rows: np.ndarray, names: tuple[str, ...]) -> Tensor:
        values = scaler(rows)
        too_large = ~(np.abs(values) <= torch.finfo(dtype).max)
        if too_large.any():
            row, column = np.argwhere(too_large)[0]
            raise CLIError(
                f"column {names[column]!r}: the value {rows[row, column]:.4g} lies {values[row, column]:.4g} training "
                f"standard deviations from the training mean, more than {str(dtype).removeprefix('torch.')} holds; "
                "remove the row or use --dtype float64"
            )
        return torch.as_tensor(values, dtype=dtype, device=device)

    return Split(
        train_x=standardised(x_scaler, data.x[train_idx], columns),
        train_y=standardised(y_scaler, data.y[train_idx, None], columns[-1:])[:, 0],
        test_x=standardised(x_scaler, data.x[test_idx], columns),
        test_y=standardised(y_scaler, data.y[test_idx, None], columns[-1:])[:, 0],
        y_mean=float(y_scaler.mean[0]),
        y_std=float(y_scaler.std[0]),
    )
