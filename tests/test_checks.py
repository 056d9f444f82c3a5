"""gprf._checks: argument validation shared by feature maps and kernels — positive integers, choices, and feature-map
inputs (shape, column count, dtype, finiteness where cheap), each with a message naming the argument."""

from __future__ import annotations

import pytest
import torch

from gprf._checks import check_choice, check_features_input, check_positive_int
from gprf.settings import validate_inputs


@pytest.mark.parametrize("value", [1, 7])
def test_positive_integers_pass_through(value):
    assert check_positive_int(value, "num_rules") == value


@pytest.mark.parametrize("value", [0, -3, 2.0, "3", True, None])
def test_anything_else_is_not_a_positive_integer(value):
    with pytest.raises(ValueError, match=rf"num_rules must be a positive integer, got {value!r}\."):
        check_positive_int(value, "num_rules")


def test_choices_are_listed_when_the_value_is_unknown():
    assert check_choice("iid", "sampler", ("iid", "qmc")) == "iid"
    with pytest.raises(ValueError, match=r"Unknown sampler 'sobol'; valid choices are: 'iid', 'qmc'\."):
        check_choice("sobol", "sampler", ("iid", "qmc"))


def test_feature_inputs_are_checked_in_order():
    check_features_input(torch.zeros(2, 3), 3, "Map")
    check_features_input(torch.zeros(4, 2, 3, dtype=torch.float64), 3, "Map")  # batched inputs
    with pytest.raises(TypeError, match="Map expects a torch.Tensor input, got list"):
        check_features_input([[0.0, 0.0, 0.0]], 3, "Map")
    with pytest.raises(ValueError, match=r"Map expects inputs of shape \(\.\.\., n, 3\), got shape \(3,\)"):
        check_features_input(torch.zeros(3), 3, "Map")
    with pytest.raises(ValueError, match=r"built for input dimension 3 but got inputs with 2 columns .*num_dims=2"):
        check_features_input(torch.zeros(5, 2), 3, "Map")
    for dtype in (torch.int64, torch.bool, torch.complex64):
        with pytest.raises(TypeError, match=f"real floating-point inputs, got dtype {dtype}"):
            check_features_input(torch.zeros(2, 3, dtype=dtype), 3, "Map")


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_inputs_are_refused_where_the_check_applies(bad):
    x = torch.zeros(2, 3)
    x[1, 0] = bad
    with pytest.raises(ValueError, match="Map received NaN or infinite inputs"):
        check_features_input(x, 3, "Map")
    with validate_inputs(False):
        check_features_input(x, 3, "Map")
