"""benchmarks.regression_data: the data folder (.npz and .csv, target last), the bundled default, the seeded
subsample and the standardised 90/10 split, and the errors for a missing folder, unknown names and bad files
(complex, text, corrupt, truncated or column-less arrays are refused, never cast or cut)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from benchmarks.regression_data import (
    dataset_files,
    load_datasets,
    load_npz,
    load_table,
    regression_split,
    subsample,
)
from gprf.cli.options import CLIError

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
    assert data.num_rows == 48 and data.notes == ("dropped 2 row(s) with missing or infinite values (in x1, y)",)


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


def _flip_bytes(path, start: int, stop: int) -> None:
    data = bytearray(path.read_bytes())
    data[start:stop] = bytes(value ^ 0xFF for value in data[start:stop])
    path.write_bytes(bytes(data))


LONG_DOUBLE_IS_WIDER = np.finfo(np.longdouble).max > np.finfo(np.float64).max


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (lambda p: np.savez(p, x=np.ones((5, 2)) * (1 + 1j), y=np.zeros(5)), "array 'x' has dtype complex128, not real "
         "numbers; store real and imaginary parts as separate columns"),
        (lambda p: np.savez(p, x=np.ones((5, 2)), y=np.zeros(5, np.complex64)), "array 'y' has dtype complex64"),
        (lambda p: np.savez(p, x=np.array([["a", "b"]] * 5), y=np.zeros(5)),
         "array 'x' has dtype <U1, not real numbers"),
        (lambda p: np.savez(p, x=np.zeros((5, 2), "datetime64[s]"), y=np.zeros(5)), "has dtype datetime64[s]"),
        (lambda p: np.savez(p, x=np.zeros((5, 0)), y=np.zeros(5)), "has x of shape (5, 0): no input columns"),
        pytest.param(lambda p: np.savez(p, x=np.full((5, 2), np.longdouble("1e400")), y=np.zeros(5)),
                     "array 'x' holds values beyond the float64 range",
                     marks=pytest.mark.skipif(not LONG_DOUBLE_IS_WIDER, reason="long double is float64 here")),
        (lambda p: np.savez(p, x=np.array([None] * 5), y=np.zeros(5)),
         "cannot read d.npz as an .npz file: Object arrays"),
        (lambda p: (np.savez(p, x=np.ones((5, 2)), y=np.zeros(5)), p.write_bytes(p.read_bytes()[:100])),
         "cannot read d.npz as an .npz file: File is not a zip file"),
        (lambda p: (np.savez(p, x=np.ones((50, 2)), y=np.zeros(50)), _flip_bytes(p, 200, 240)),
         "cannot read d.npz as an .npz file: Bad CRC-32 for file 'x.npy'"),
        (lambda p: (np.savez_compressed(p, x=np.ones((50, 2)), y=np.zeros(50)), _flip_bytes(p, 60, 90)),
         "cannot read d.npz as an .npz file: Error -3 while decompressing data"),
        (lambda p: p.write_bytes(b""), "cannot read d.npz as an .npz file: No data left in file"),
        (lambda p: (np.save(p.with_suffix(".npy"), np.ones(3)), p.with_suffix(".npy").rename(p)),
         "d.npz holds one .npy array, not an .npz archive of x and y"),
    ],
)  # fmt: skip
def test_npz_files_that_are_not_real_tables_are_clear_errors(tmp_path, write, message):
    path = tmp_path / "d.npz"
    write(path)
    with pytest.raises(CLIError) as err:
        load_npz(path)
    assert str(err.value).startswith("argument --data-dir: ") and message in str(err.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"a,b,y\n\xe9,1,2\n", "argument --data-dir: t.csv is not UTF-8 text (invalid continuation byte at byte 6)"),
        (b"a,a,y\n1,2,3\n", "argument --data-dir: t.csv: the header of '{path}' names column(s) 'a' more than once"),
        (b"a,b,y\n1,2,3\n4,x,6\n", "argument --data-dir: t.csv: column 'b' mixes numbers and text (line 3: 'x')"),
    ],
)
def test_csv_files_of_the_folder_are_refused_naming_the_file_once(tmp_path, content, message):
    path = tmp_path / "t.csv"
    path.write_bytes(content)
    with pytest.raises(CLIError) as err:
        load_table(path)
    assert str(err.value).startswith(message.format(path=path))


@settings(max_examples=60, deadline=None)
@given(
    x=hnp.arrays(
        st.sampled_from([np.float64, np.float32, np.float16, np.int64, np.uint8, np.bool_]),
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=6),
        elements={"allow_nan": False, "allow_infinity": False},
    ),
    data=st.data(),
)
def test_any_real_npz_table_loads_back_exactly(tmp_path_factory, x, data):
    y = data.draw(hnp.arrays(np.float64, x.shape[0], elements={"allow_nan": False, "allow_infinity": False}))
    path = tmp_path_factory.mktemp("npz") / "t.npz"
    np.savez(path, x=x, y=y, split=np.arange(3))
    loaded = load_npz(path)
    assert (
        loaded.x.dtype == np.float64
        and loaded.notes == ()
        and loaded.input_names == tuple(f"x{j}" for j in range(x.shape[1]))
    )
    np.testing.assert_array_equal(loaded.x, x.astype(np.float64))
    np.testing.assert_array_equal(loaded.y, y)


@settings(max_examples=40, deadline=None)
@given(x=hnp.arrays(np.float64, (6, 3)), y=hnp.arrays(np.float64, 6))
def test_npz_rows_with_any_non_finite_value_are_dropped_and_the_rest_kept(tmp_path_factory, x, y):
    path = tmp_path_factory.mktemp("npz") / "t.npz"
    np.savez(path, x=x, y=y)
    loaded = load_npz(path)
    complete = np.isfinite(x).all(-1) & np.isfinite(y)
    np.testing.assert_array_equal(loaded.x, x[complete])
    np.testing.assert_array_equal(loaded.y, y[complete])
    assert len(loaded.notes) == int(not complete.all())


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
