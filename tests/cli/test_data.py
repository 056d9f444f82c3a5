"""Dataset loading and splitting for ``gprf compare`` (gprf.cli.data): what is read is what the file holds (or a
clear error naming the column), and standardisation holds for values up to the float64 limit."""

from __future__ import annotations

import string

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gprf.cli.data import Dataset, Standardiser, load_csv, load_dataset, split_dataset
from gprf.cli.options import CLIError


def test_default_dataset_is_bundled_diabetes():
    data = load_dataset(None, None)
    assert data.num_rows == 442 and data.num_inputs == 10
    assert data.x.dtype == np.float64 and np.isfinite(data.x).all() and np.isfinite(data.y).all()
    assert load_dataset("diabetes", None).num_rows == 442


def test_csv_ignores_text_columns_and_drops_incomplete_rows(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("x1;name;x2;y\n1;a;2;3\n4;b;NA;5\n6;c;7;\n8;d;9;10\n")  # semicolons are sniffed
    data = load_csv(path, "y")
    assert data.input_names == ("x1", "x2") and data.target_name == "y"
    np.testing.assert_array_equal(data.x, [[1, 2], [8, 9]])
    np.testing.assert_array_equal(data.y, [3, 10])
    assert data.notes == (
        "ignored non-numeric column(s): name",
        "dropped 2 row(s) with missing or infinite values (in x2, y)",
    )


def test_csv_drops_rows_with_written_infinities_naming_their_column(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,b,y\n1,2,3\n4,-inf,6\n7,8,9\n10,11,Infinity\n")
    data = load_csv(path, "y")
    np.testing.assert_array_equal(data.x, [[1, 2], [7, 8]])
    assert data.notes == ("dropped 2 row(s) with missing or infinite values (in b, y)",)


@pytest.mark.parametrize(
    ("text", "target", "message"),
    [
        ("a,b\n1,2\n", None, "--data needs --target COLUMN; available columns: a, b"),
        ("a,b\n1,2\n", "c", "no column 'c'"),
        ("a,b\n1,x\n", "b", "column 'b' is not numeric (line 2: 'x')"),
        ("a,b\n1,2,3\n", "b", "line 2"),
        ("a,b\n", "b", "header row and at least one data row"),
        ("t,y\nu,1\n", "y", "no numeric input columns"),
        ("a,a,y\n1,2,3\n", "y", "names column(s) 'a' more than once; give every column a distinct name"),
        ("a,b,a,b,y\n1,2,3,4,5\n", "y", "names column(s) 'a', 'b' more than once"),
        ("a,b,y\n1,2,3\n4,five,6\n", "y", "column 'b' mixes numbers and text (line 3: 'five'); correct the entry"),
        ("a,b,y\n1,2,3\n4,-2e308,6\n", "y", "column 'b' line 3: '-2e308' is beyond the float64 range"),
        ("a,y\n1,2\n3,1e999\n", "y", "column 'y' line 3: '1e999' is beyond the float64 range"),
    ],
)
def test_csv_errors(tmp_path, text, target, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(CLIError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_csv(path, target)


def _dataset(n: int = 50, d: int = 3) -> Dataset:
    rng = np.random.default_rng(1)
    x = rng.normal(3.0, 2.0, size=(n, d))
    x[:, -1] = 5.0  # a constant column keeps a unit scale
    return Dataset("toy", x, x[:, 0] * 10 + 1, tuple("abc"[:d]), "y")


def test_split_is_seeded_standardised_by_training_statistics_and_capped():
    data = _dataset()
    split = split_dataset(data, 0.2, seed=4, max_train=30, dtype=torch.float32)
    assert split.train_x.shape == (30, 3) and split.test_x.shape == (10, 3)
    assert split.train_x.dtype == torch.float32
    torch.testing.assert_close(split.train_x[:, :2].mean(0), torch.zeros(2), atol=1e-5, rtol=0)
    torch.testing.assert_close(split.train_x[:, :2].std(0, unbiased=False), torch.ones(2), atol=1e-5, rtol=0)
    assert torch.all(split.train_x[:, 2] == 0) and torch.all(split.test_x[:, 2] == 0)
    torch.testing.assert_close(split.train_y.std(unbiased=False), torch.tensor(1.0), atol=1e-5, rtol=0)

    again = split_dataset(data, 0.2, seed=4, max_train=30, dtype=torch.float32)
    other = split_dataset(data, 0.2, seed=5, max_train=30, dtype=torch.float32)
    assert torch.equal(split.test_y, again.test_y)
    assert not torch.equal(split.test_y, other.test_y)


def test_split_errors_on_too_few_rows_and_constant_target():
    data = _dataset(n=2)
    with pytest.raises(CLIError, match="at least 2 training rows"):
        split_dataset(data, 0.2, seed=0)
    constant = Dataset("c", np.ones((10, 2)), np.full(10, 3.0), ("a", "b"), "y")
    with pytest.raises(CLIError, match="constant"):
        split_dataset(constant, 0.2, seed=0)
    with pytest.raises(CLIError, match="argument --max-train: at least 2 training rows are needed .*, got 1"):
        split_dataset(_dataset(), 0.2, seed=0, max_train=1)


def test_the_split_of_values_near_the_float64_limit_is_the_split_of_the_same_values_scaled_down():
    """Columns of magnitude 1e200 and 1e307 (whose squares overflow float64) standardise to the same numbers as the
    columns divided by those powers of ten, instead of to zeros."""
    data = _dataset()
    powers = np.array([1e200, 1e307, 1.0])
    huge = Dataset("huge", data.x * powers, data.y * 1e300, data.input_names, "y")
    split, reference = (split_dataset(d, 0.2, seed=4, max_train=30) for d in (huge, data))
    for name in ("train_x", "test_x", "train_y", "test_y"):
        torch.testing.assert_close(getattr(split, name), getattr(reference, name), rtol=1e-12, atol=1e-12)
    assert split.y_std == pytest.approx(1e300 * reference.y_std, rel=1e-12)
    assert split.y_mean == pytest.approx(1e300 * reference.y_mean, rel=1e-12)


def test_standardiser_matches_numpy_and_keeps_a_unit_scale_for_constant_columns():
    rows = np.random.default_rng(2).normal(3.0, 2.0, size=(20, 2))
    rows[:, 1] = -4.0
    scaler = Standardiser.fit(rows, constant_scale=1.0)
    np.testing.assert_allclose(scaler.mean, rows.mean(0), rtol=1e-14)
    np.testing.assert_allclose(scaler.std, [rows[:, 0].std(), 1.0], rtol=1e-14)
    np.testing.assert_allclose(scaler(rows + 1.0)[:, 1], 1.0, rtol=1e-14)  # a unit scale in the column's own units
    assert Standardiser.fit(rows).std[1] == 0.0


def test_a_standardised_value_beyond_float32_is_refused_naming_the_column():
    """A row 1e60 away from the others: as a training row it sets the scale, as a test row its standardised value
    exceeds float32 (float64 holds it). Placed in each row in turn, the float32 split is refused, naming the column,
    exactly for the placements that make it one of the two test rows, and otherwise matches float64."""
    refused = 0
    for far_row in range(10):
        x = np.random.default_rng(far_row).normal(size=(10, 2))
        x[far_row, 1] = 1e60
        data = Dataset("far", x, np.arange(10.0), ("a", "b"), "y")
        reference = split_dataset(data, 0.2, seed=0)
        if reference.test_x.abs().max() > torch.finfo(torch.float32).max:
            refused += 1
            with pytest.raises(CLIError, match="column 'b': the value 1e[+]60 lies .* more than float32 holds"):
                split_dataset(data, 0.2, seed=0, dtype=torch.float32)
        else:
            split = split_dataset(data, 0.2, seed=0, dtype=torch.float32)
            torch.testing.assert_close(split.test_x.double(), reference.test_x, rtol=1e-6, atol=1e-6)
    assert refused == 2


# ----------------------------------------------------------------------------------------- property tests
_NAMES = st.text(string.ascii_letters + "_", min_size=1, max_size=6)
_VALUES = st.floats(allow_nan=False, allow_infinity=False, width=64)


@st.composite
def _tables(draw):
    """A header of distinct column names and rows of finite float64 values (extreme magnitudes included)."""
    names = draw(st.lists(_NAMES, min_size=2, max_size=5, unique=True))
    num_rows = draw(st.integers(1, 8))
    values = draw(st.lists(st.lists(_VALUES, min_size=len(names), max_size=len(names)), min_size=num_rows,
                           max_size=num_rows))  # fmt: skip
    return names, np.array(values, dtype=np.float64)


@settings(max_examples=60, deadline=None)
@given(table=_tables(), delimiter=st.sampled_from([",", ";", "\t"]))
def test_any_table_written_as_csv_loads_back_exactly(tmp_path_factory, table, delimiter):
    names, values = table
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    lines = [delimiter.join(names), *(delimiter.join(repr(float(v)) for v in row) for row in values)]
    path.write_text("\n".join(lines) + "\n")
    data = load_csv(path, names[-1])
    assert data.input_names == tuple(names[:-1]) and data.notes == ()
    np.testing.assert_array_equal(data.x, values[:, :-1])
    np.testing.assert_array_equal(data.y, values[:, -1])


@settings(max_examples=60, deadline=None)
@given(table=_tables(), holes=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 4)), max_size=4))
def test_missing_entries_drop_exactly_their_rows_naming_their_columns(tmp_path_factory, table, holes):
    names, values = table
    holes = sorted({(row % values.shape[0], column % len(names)) for row, column in holes})
    cells = [[repr(float(v)) for v in row] for row in values]
    for row, column in holes:
        cells[row][column] = "NA"
    path = tmp_path_factory.mktemp("csv") / "t.csv"
    path.write_text("\n".join([",".join(names), *(",".join(row) for row in cells)]) + "\n")
    data = load_csv(path, names[-1])
    kept = [row for row in range(values.shape[0]) if row not in {r for r, _ in holes}]
    np.testing.assert_array_equal(data.x, values[kept, :-1])
    np.testing.assert_array_equal(data.y, values[kept, -1])
    columns = ", ".join(names[c] for c in sorted({c for _, c in holes}))
    expected = (f"dropped {values.shape[0] - len(kept)} row(s) with missing or infinite values (in {columns})",)
    assert data.notes == (expected if holes else ())
