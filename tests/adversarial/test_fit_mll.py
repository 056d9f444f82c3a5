"""Adversarial inputs to :func:`gprf.fit_mll`: every option out of range or of the wrong type, objectives and
likelihoods it cannot fit, training data it must refuse, and the smallest problems it must still fit."""

from __future__ import annotations

import math

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.mlls import ExactMarginalLogLikelihood, LeaveOneOutPseudoLikelihood

import gprf
from gprf.exceptions import BudgetWarning, NonFiniteTrainingDataError
from gprf.kernels import PreconditionedKernel, RandomFourierKernel
from gprf.testing import ExactGPModel, regression_data


def _mll(x=None, y=None, likelihood=None, num_features=32):
    if x is None:
        x, y = regression_data(n=60, d=2)
    likelihood = likelihood or gpytorch.likelihoods.GaussianLikelihood()
    kernel = ScaleKernel(RandomFourierKernel(num_features, num_dims=x.size(-1), seed=0))
    model = ExactGPModel(x, y, likelihood, kernel).to(x.dtype)
    return ExactMarginalLogLikelihood(likelihood, model)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"tune_rows": 0}, ValueError, r"tune_rows must be >= 1 \(rows of the subsample\), got 0"),
        ({"tune_rows": -1}, ValueError, "tune_rows must be >= 1"),
        ({"tune_rows": 2.5}, TypeError, "tune_rows must be an integer >= 1 or None"),
        ({"tune_features": 0}, ValueError, r"tune_features must be >= 1 \(features\), got 0"),
        ({"tune_features": "all"}, TypeError, "tune_features must be an integer >= 1 or None"),
        ({"tune_steps": -1}, ValueError, r"tune_steps must be >= 0 \(Adam steps\), got -1"),
        ({"tune_steps": None}, TypeError, "tune_steps must be an integer >= 0"),
        ({"finish_steps": -1}, ValueError, r"finish_steps must be >= 0 \(L-BFGS iterations\)"),
        ({"lr": 0}, ValueError, "lr must be a positive finite float"),
        ({"lr": -0.1}, ValueError, "lr must be a positive finite float"),
        ({"lr": math.nan}, ValueError, "lr must be a positive finite float"),
        ({"lr": math.inf}, ValueError, "lr must be a positive finite float"),
        ({"time_budget": 0}, ValueError, "time_budget must be positive seconds or None, got 0"),
        ({"time_budget": -1}, ValueError, "time_budget must be positive seconds or None"),
        ({"time_budget": math.nan}, ValueError, "time_budget must be positive seconds or None, got nan"),
        ({"grow": "half"}, ValueError, "grow must be 'fit' or 'full'"),
        (
            {"exact_start": "warm"},
            ValueError,
            r"exact_start must be .* \(the exact route's start\), got 'warm'",
        ),
        ({"exact_start": "Subsample"}, ValueError, "exact_start must be 'subsample' or 'surrogate'"),
        ({"exact_start": None}, TypeError, "exact_start must be 'subsample' or 'surrogate' .* got NoneType None"),
        ({"seed": -1}, ValueError, r"seed must be an integer in \[0, 2\*\*63\) or None"),
        ({"seed": 2**63}, ValueError, r"seed must be an integer in \[0, 2\*\*63\)"),
        ({"seed": 1.0}, TypeError, "seed must be an integer .* got float 1.0"),
        ({"seed": True}, TypeError, "seed must be an integer"),
        ({"callback": 3}, TypeError, r"callback must be callable as callback\(stage, seconds\) or None, got int"),
        ({"progress": "yes"}, TypeError, "progress must be True or False, got str 'yes'"),
    ],
    ids=lambda value: str(value) if isinstance(value, dict) else None,
)
def test_bad_options_are_refused_naming_them(options, error, match):
    with pytest.raises(error, match=match):
        gprf.fit_mll(_mll(), **options)


def test_options_are_keyword_only():
    with pytest.raises(TypeError, match="takes 1 positional argument"):
        gprf.fit_mll(_mll(), 10)


@pytest.mark.parametrize("objective", ["model", "loo"])
def test_objectives_other_than_the_exact_marginal_likelihood_are_refused(objective):
    mll = _mll()
    target = mll.model if objective == "model" else LeaveOneOutPseudoLikelihood(mll.likelihood, mll.model)
    match = "fit_mll takes gpytorch.mlls.ExactMarginalLogLikelihood" if objective == "model" else "another objective"
    with pytest.raises(TypeError, match=match):
        gprf.fit_mll(target)


def test_observed_noise_of_another_length_than_the_data_is_refused():
    likelihood = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(torch.full((10,), 0.01, dtype=torch.float64))
    with pytest.raises(ValueError, match="holds 10 noise variances but the model has 60 training points"):
        gprf.fit_mll(_mll(likelihood=likelihood))


def test_nan_training_inputs_name_the_rows():
    x, y = regression_data(n=60, d=2)
    x[4, 0] = math.nan
    with pytest.raises(NonFiniteTrainingDataError, match=r"in 1 of 60 rows \(rows 4\)"):
        gprf.fit_mll(_mll(x, y))


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_targets_are_refused(bad):
    x, y = regression_data(n=60, d=2)
    y[3] = bad
    with pytest.raises(ValueError, match="NaN or infinite"):
        gprf.fit_mll(_mll(x, y))


def test_no_training_rows_are_refused():
    x, y = regression_data(n=60, d=2)
    with pytest.raises(ValueError, match="got no rows"):
        gprf.fit_mll(_mll(x[:0], y[:0]))


def test_one_training_point_fits_to_a_model_that_predicts_finite_values():
    x, y = regression_data(n=60, d=2)
    mll = gprf.fit_mll(_mll(x[:1], y[:1]))
    assert not mll.training
    with torch.no_grad():
        prediction = mll.model(x[1:4])
    assert bool(prediction.mean.isfinite().all()) and bool((prediction.variance > 0).all())


def test_no_tuning_steps_keeps_the_lengthscale_and_refits_the_scales():
    mll = _mll()
    lengthscale = mll.model.covar_module.base_kernel.lengthscale.detach().clone()
    gprf.fit_mll(mll, tune_steps=0, tune_rows=20, tune_features=8, finish_steps=0)
    torch.testing.assert_close(mll.model.covar_module.base_kernel.lengthscale.detach(), lengthscale)
    assert not math.isclose(float(mll.model.likelihood.noise), 0.6931, rel_tol=1e-3)  # softplus(0): refitted


def test_a_subsample_of_every_row_is_the_full_fit():
    """``tune_rows`` at least the number of rows (or ``None``) uses every row: the same fit."""
    fits = []
    for tune_rows in (None, 60, 10_000):
        mll = gprf.fit_mll(_mll(), tune_rows=tune_rows, tune_features=8, tune_steps=5, finish_steps=0)
        fits.append(torch.cat([p.detach().reshape(-1) for p in mll.parameters()]))
    torch.testing.assert_close(fits[0], fits[1], rtol=0, atol=0)
    torch.testing.assert_close(fits[0], fits[2], rtol=0, atol=0)


@pytest.mark.parametrize(
    ("time_budget", "error", "match"),
    [
        (True, TypeError, "time_budget must be positive seconds or None, got bool True"),
        ("10", TypeError, "time_budget must be positive seconds or None, got str '10'"),
        (math.inf, None, None),
    ],
)
def test_time_budget_types(time_budget, error, match):
    if error is None:
        assert not gprf.fit_mll(_mll(), time_budget=time_budget, tune_steps=2).training
        return
    with pytest.raises(error, match=match):
        gprf.fit_mll(_mll(), time_budget=time_budget)


@pytest.mark.parametrize(("grow", "kept"), [("fit", 32), ("full", 256)])
def test_a_budget_too_short_for_the_refit_warns_and_cuts_or_keeps_the_features(grow, kept):
    x, y = regression_data(n=300, d=2)
    mll = _mll(x, y, num_features=256)
    with pytest.warns(BudgetWarning, match="fit_mll: the exact refit at F = 256 features is estimated at"):
        gprf.fit_mll(mll, time_budget=1e-3, grow=grow, tune_features=32, tune_steps=2)
    assert mll.model.covar_module.base_kernel.num_features == kept
    with torch.no_grad():
        assert bool(mll.model(x[:3]).mean.isfinite().all())


def test_the_exact_route_checks_the_observed_noise_too():
    x, y = regression_data(n=60, d=2)
    likelihood = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(torch.full((5,), 0.01, dtype=torch.float64))
    kernel = PreconditionedKernel(ScaleKernel(RBFKernel(ard_num_dims=2)), 16, seed=0)
    model = ExactGPModel(x, y, likelihood, kernel).double()
    with pytest.raises(ValueError, match="holds 5 noise variances but the model has 60 training points"):
        gprf.fit_mll(ExactMarginalLogLikelihood(likelihood, model))


def test_the_exact_route_with_a_tiny_budget_ends_in_eval_mode_at_a_point_that_predicts():
    x, y = regression_data(n=60, d=2)
    kernel = PreconditionedKernel(ScaleKernel(RBFKernel(ard_num_dims=2)), 16, seed=0)
    model = ExactGPModel(x, y, gpytorch.likelihoods.GaussianLikelihood(), kernel).double()
    mll = gprf.fit_mll(ExactMarginalLogLikelihood(model.likelihood, model), time_budget=1e-3)
    assert not mll.training
    with torch.no_grad():
        assert bool(model(x[:3]).mean.isfinite().all())
