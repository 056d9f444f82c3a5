"""gprf._checks: argument validation shared by feature maps and kernels — positive integers, choices, and feature-map
inputs (shape, column count, dtype, finiteness where cheap), a kernel's input dimension, each with a message naming
the argument."""

from __future__ import annotations

import gpytorch
import pytest
import torch

import gprf
from gprf._checks import (
    check_choice,
    check_features_input,
    check_positive_int,
    check_training_inputs,
    describe_nonfinite_rows,
    resolve_num_dims,
)
from gprf.exceptions import NonFiniteTrainingDataError
from gprf.settings import validate_inputs
from gprf.testing import regression_data
from tests.helpers.regression import make_model


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


def test_non_finite_rows_are_counted_and_listed():
    x = torch.zeros(2, 9, 3)
    x[1, 4, 0] = float("nan")
    x[0, 7, 2] = float("-inf")
    assert describe_nonfinite_rows(x) == "2 of 9 rows (rows 4, 7)"
    x[0, :, 1] = float("nan")
    assert describe_nonfinite_rows(x, shown=3) == "9 of 9 rows (rows 0, 1, 2, ...)"


def test_training_inputs_with_nan_name_the_rows():
    x, y = regression_data(n=20)
    x[[3, 7], 1] = float("nan")
    with pytest.raises(NonFiniteTrainingDataError, match=r"training inputs hold NaN .* in 2 of 20 rows \(rows 3, 7\)"):
        check_training_inputs((x,))
    check_training_inputs((x[:3], torch.arange(3)))  # finite floating inputs and integer inputs pass
    # gprf.fit_mll checks them first; a hand-written training loop reaches the kernel (with GPyTorch's debug check
    # off: on, GPyTorch reports "You must train on the training inputs!" first, since NaN != NaN).
    model = make_model(x, y).train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    with pytest.raises(NonFiniteTrainingDataError, match=r"in 2 of 20 rows \(rows 3, 7\)"):
        gprf.fit_mll(mll, tune_steps=1)
    with gpytorch.settings.debug(False), pytest.raises(ValueError, match=r"NaN or infinite inputs in 2 of 20 rows"):
        mll(model(x), y)


def test_num_dims_is_resolved_from_the_arguments_or_refused():
    assert resolve_num_dims(4, None, None, "K") == 4
    assert resolve_num_dims(None, 3, None, "K") == 3
    assert resolve_num_dims(None, None, [0, 2], "K") == 2
    assert resolve_num_dims(5, 1, None, "K") == 5  # an isotropic lengthscale fits any dimension
    with pytest.raises(ValueError, match=r"K needs the input dimension .*num_dims=d"):
        resolve_num_dims(None, None, None, "K")
    with pytest.raises(ValueError, match=r"K: ard_num_dims=2 does not match num_dims=3"):
        resolve_num_dims(3, 2, None, "K")
