"""gprf.cli.regression_data: the data folder (.npz and .csv, target last), the bundled default, the seeded
subsample and the standardised 90/10 split, and the errors for a missing folder, unknown names and bad files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gprf.cli.options import CLIError
from gprf.cli.regression_data import dataset_files, load_datasets, load_npz, regression_split, subsample

CPU = torch.device("cpu")


def _smooth(num_rows: int = 50, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=(num_rows, 2))
    return x, np.sin(x[:, 0]) + x[:, 1]


def test_a_folder_lists_npz_and_csv_files_by_name_npz_first(tmp_path):
    x, y = _smooth()
    np.savez(tmp_path / "b.npz", x=x, y=y)
    (tmp_path / "b.csv").write_text("u,v\n1,2\n")
    (tmp_path / "a.csv").write_text("u,v\n1,2\n")
    (tmp_path / "notes.txt").write_text("not data")
    assert dataset_files(tmp_path) == {"a": tmp_path / "a.csv", "b": tmp_path / "b.npz"}


def test_npz_and_csv_hold_the_same_data(tmp_path):
    x, y = _smooth()
    np.savez(tmp_path / "d.npz", x=x, y=y[:, None], test_mask_split0=np.zeros(50, dtype=bool))
    rows = [f"{float(a)!r};{float(b)!r};{float(t)!r}" for (a, b), t in zip(x, y, strict=True)]
    (tmp_path / "e.csv").write_text("\n".join(["first;second;target", *rows]) + "\n")  # sniffed delimiter
    from_npz, from_csv = load_datasets(str(tmp_path), ["d", "e"])
    assert (from_npz.name, from_csv.name) == ("d", "e")
    assert from_csv.input_names == ("first", "second") and from_csv.target_name == "target"
    for data in (from_npz, from_csv):
        np.testing.assert_array_equal(data.x, x)
        np.testing.assert_array_equal(data.y, y)


def test_npz_rows_with_missing_values_are_dropped_with_a_note(tmp_path):
    x, y = _smooth()
    x[3, 1], y[7] = np.nan, np.inf
    np.savez(tmp_path / "d.npz", x=x, y=y)
    data = load_npz(tmp_path / "d.npz")
    assert data.num_rows == 48 and data.notes == ("dropped 2 row(s) with missing or infinite values",)


def test_without_a_folder_the_bundled_dataset():
    (data,) = load_datasets(None, None)
    assert data.name == "diabetes" and data.x.shape == (442, 10)


@pytest.mark.parametrize(
    ("files", "data_dir", "names", "message"),
    [
        ({}, "missing", None, "argument --data-dir: no such folder"),
        ({}, ".", None, "holds no .npz or .csv files"),
        ({"a.csv": "u,y\n1,2\n"}, ".", ["a", "zz"], "argument --datasets: no file zz.npz/.csv in"),
        ({}, None, ["zz"], "argument --datasets: no built-in dataset 'zz' (built-in: diabetes)"),
        ({"a.csv": "u,y\n1,2,3\n"}, ".", None, "argument --data-dir: a.csv: line 2 of"),
        ({"a.csv": "u,y\n1,oops\n2,3\n"}, ".", None, "a.csv: column 'y' is not numeric (line 2: 'oops')"),
        ({"a.csv": "y\n1\n2\n"}, ".", None, "has no numeric input columns besides the target 'y'"),
        ({"a.npz": b"not an npz"}, ".", None, "cannot read a.npz as an .npz file"),
    ],
)
def test_bad_folders_names_and_files_are_clear_errors(tmp_path, files, data_dir, names, message):
    for name, content in files.items():
        path = tmp_path / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    folder = None if data_dir is None else str(tmp_path / data_dir)
    with pytest.raises(CLIError) as err:
        load_datasets(folder, names)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [({"x": np.zeros((5, 2))}, "lacks array(s) y"), ({"x": np.zeros((5, 2)), "y": np.zeros(4)}, "y of shape (4,)")],
)
def test_npz_without_matching_x_and_y_is_a_clear_error(tmp_path, arrays, message):
    np.savez(tmp_path / "d.npz", **arrays)
    with pytest.raises(CLIError) as err:
        load_npz(tmp_path / "d.npz")
    assert str(err.value).startswith("argument --data-dir: d.npz ") and message in str(err.value)
    assert "it needs x of shape (n, d)" in str(err.value) and "cannot read" not in str(err.value)


def test_subsample_is_seeded_distinct_rows_in_order():
    x, y = _smooth(100)
    from gprf.cli.data import Dataset

    data = Dataset("d", x, y, ("a", "b"), "y")
    first, again, other = subsample(data, 30, 1), subsample(data, 30, 1), subsample(data, 30, 2)
    np.testing.assert_array_equal(first.x, again.x)
    assert not np.array_equal(first.x, other.x)
    rows = [int(np.flatnonzero((x == row).all(-1))[0]) for row in first.x]
    assert rows == sorted(set(rows)) and len(rows) == 30
    assert first.notes == ("subsampled 30 of 100 rows",)
    assert subsample(data, 100, 1) is data


def test_split_is_90_10_standardised_by_the_training_rows(tmp_path):
    x, y = _smooth(200)
    np.savez(tmp_path / "d.npz", x=x, y=3.0 * y + 5.0)
    (data,) = load_datasets(str(tmp_path), None)
    sample, split = regression_split(data, 150, 0, CPU, torch.float32)
    assert sample.num_rows == 150 and split.train_x.shape == (135, 2) and split.test_y.shape == (15,)
    assert split.train_x.dtype == torch.float32
    torch.testing.assert_close(split.train_x.mean(0), torch.zeros(2), atol=1e-5, rtol=0)
    torch.testing.assert_close(split.train_y.std(unbiased=False), torch.tensor(1.0), atol=1e-5, rtol=0)
    # the test rows are the sample's other rows, in the same units
    raw_test = torch.as_tensor(split.test_y.double() * split.y_std + split.y_mean)
    assert all(np.isclose(sample.y, value, atol=1e-4).any() for value in raw_test.tolist())


def test_too_few_rows_is_a_clear_error(tmp_path):
    x, y = _smooth(9)
    np.savez(tmp_path / "d.npz", x=x, y=y)
    (data,) = load_datasets(str(tmp_path), None)
    with pytest.raises(CLIError, match="dataset 'd' has 9 usable row"):
        regression_split(data, 100, 0, CPU, torch.float64)
