"""Dataset loading and splitting for ``gprf compare`` (gprf.cli.data)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gprf.cli.data import Dataset, load_csv, load_dataset, split_dataset
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
    assert any("name" in note for note in data.notes)
    assert any("dropped 2 row(s)" in note for note in data.notes)


@pytest.mark.parametrize(
    ("text", "target", "message"),
    [
        ("a,b\n1,2\n", None, "--data needs --target COLUMN; available columns: a, b"),
        ("a,b\n1,2\n", "c", "no column 'c'"),
        ("a,b\n1,x\n", "b", "column 'b' is not numeric (line 2: 'x')"),
        ("a,b\n1,2,3\n", "b", "line 2"),
        ("a,b\n", "b", "header row and at least one data row"),
        ("t,y\nu,1\n", "y", "no numeric input columns"),
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
