"""``gprf.fit_mll`` on exact models with a PreconditionedKernel: tuned through the random-feature surrogate, then exact
marginal-likelihood steps that raise the exact marginal likelihood, within the time budget; clear errors."""

from __future__ import annotations

import contextlib
import warnings
from unittest import mock

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.likelihoods import BernoulliLikelihood, GaussianLikelihood, MultitaskGaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from linear_operator.utils.warnings import NumericalWarning

import gprf
from gprf.exceptions import FitFallbackWarning
from gprf.fitting import budget as fit_budget
from gprf.fitting import exact_route
from gprf.fitting.end_point import parameter_values, restore_parameter_values
from gprf.fitting.exact_route import holds_preconditioned_kernel, random_feature_surrogate
from gprf.fitting.recipe import _loss
from gprf.fitting.row_subsample import subsample_rows
from gprf.kernels import PreconditionedKernel, RandomFourierKernel
from tests.helpers.models import GprfDistributionGP


def _mll(n: int = 300, num_features: int = 32, dtype=torch.float64, **options) -> ExactMarginalLogLikelihood:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(n, 3, generator=generator, dtype=torch.float64) * 4 - 2
    f = torch.sin(2 * x[:, 0]) * torch.cos(x[:, 1]) + 0.5 * x[:, 2]
    y = f + 0.05 * torch.randn(n, generator=generator, dtype=torch.float64)
    kernel = PreconditionedKernel(ScaleKernel(RBFKernel(ard_num_dims=3)), num_features, seed=0, **options)
    model = GprfDistributionGP(x.to(dtype), y.to(dtype), GaussianLikelihood(), kernel).to(dtype)
    return ExactMarginalLogLikelihood(model.likelihood, model)


def _exact_mll(mll: ExactMarginalLogLikelihood) -> float:
    """The exact marginal likelihood per point (Cholesky: at most max_cholesky_size points, deterministic)."""
    model = mll.model
    assert model.train_targets.numel() <= gpytorch.settings.max_cholesky_size.value()
    mll.train()
    with torch.no_grad():
        return float(mll(model(*model.train_inputs), model.train_targets))


def test_exact_steps_raise_the_exact_marginal_likelihood_above_the_surrogates_end_point():
    mll = _mll()
    model, kernel = mll.model, mll.model.covar_module
    stages, surrogate_end = [], {}

    def record(stage, _):
        stages.append(stage)
        if stage == "finish":  # the surrogate recipe's last stage (a small problem: L-BFGS after the scale refit)
            surrogate_end["values"] = parameter_values(mll)

    start = _exact_mll(mll)
    returned = gprf.fit_mll(mll, exact_start="surrogate", finish_steps=30, callback=record)
    assert returned is mll and not model.training
    end = _exact_mll(mll)
    restore_parameter_values(mll, surrogate_end["values"])
    surrogate = _exact_mll(mll)
    assert start < surrogate < end, (start, surrogate, end)
    assert stages[-32:] == ["finish", *(f"exact {step}" for step in range(1, 31)), "exact"]
    # The exact kernel is back in the model (whose exact marginal likelihood rose: it holds the trained parameters).
    assert model.covar_module is kernel and holds_preconditioned_kernel(model)


def test_the_surrogate_shares_the_parameters_and_is_put_back_when_the_fit_fails():
    mll = _mll()
    model, kernel = mll.model, mll.model.covar_module
    with random_feature_surrogate(model):
        surrogate = model.covar_module
        assert isinstance(surrogate.base_kernel, RandomFourierKernel) and surrogate.base_kernel.num_features == 32
        assert surrogate.raw_outputscale is kernel.base_kernel.raw_outputscale
        assert not holds_preconditioned_kernel(model)

    def fail(stage, _):
        raise KeyboardInterrupt(stage)

    with pytest.raises(KeyboardInterrupt, match="^tune"):
        gprf.fit_mll(mll, exact_start="surrogate", callback=fail)
    assert model.covar_module is kernel


class _EvaluationTime:
    """A ``time.perf_counter`` that advances one second per evaluation of the model and stands still otherwise."""

    def __init__(self, model):
        self.seconds = 0.0
        forward = model.forward

        def counted(*args):
            self.seconds += 1.0
            return forward(*args)

        model.forward = counted

    def __call__(self) -> float:
        return self.seconds


@pytest.mark.parametrize("budget", [7.5, 20.5])
def test_the_fit_keeps_the_time_budget_of_a_mocked_clock(budget):
    mll = _mll(n=400, num_features=64)
    clock = _EvaluationTime(mll.model)
    stages = []
    # The recipe's steps read time.perf_counter and its clock gprf.fitting.budget's: both count evaluations.
    with mock.patch("time.perf_counter", clock), mock.patch.object(fit_budget, "perf_counter", clock):
        gprf.fit_mll(
            mll,
            exact_start="surrogate",
            time_budget=budget,
            tune_rows=200,
            tune_features=32,
            callback=lambda *call: stages.append(call),
        )
    exact_steps = [seconds for stage, seconds in stages if stage.startswith("exact ")]
    surrogate_end = next(seconds for stage, seconds in stages if stage == "scale")
    # The surrogate keeps to its share of the budget, plus the prediction check of its end point (one evaluation).
    assert surrogate_end <= exact_route.SURROGATE_SHARE * budget + 1
    # Each exact step costs one second: they start while a second is left, and the fit ends within the budget.
    assert exact_steps and stages[-1][0] == "exact"
    assert budget - 1 <= stages[-1][1] <= budget
    assert len(exact_steps) == stages[-1][1] - (exact_steps[0] - 1)


def test_the_exact_subsample_start_runs_on_seeded_rows_by_cholesky_before_the_full_data_steps():
    mll = _mll(n=300)
    model = mll.model
    x, y = model.train_inputs[0], model.train_targets
    evaluated = []

    def recording(mll):
        if holds_preconditioned_kernel(mll.model):  # not the surrogate's recipe
            evaluated.append((mll.model.train_targets.clone(), gpytorch.settings.max_cholesky_size.value()))
        return _loss(mll)

    stages = []
    with mock.patch("gprf.fitting.recipe._loss", side_effect=recording):
        gprf.fit_mll(mll, tune_rows=120, tune_steps=4, finish_steps=3, seed=7, callback=lambda s, _: stages.append(s))
    rows = subsample_rows(300, 120, 7, y.device)
    assert [targets.numel() for targets, _ in evaluated] == [120] * 4 + [300] * 3
    assert all(torch.equal(targets, y[rows]) for targets, _ in evaluated[:4])
    assert [size for _, size in evaluated[:4]] == [120] * 4  # factored by Cholesky
    assert stages == [*(f"exact subsample {k}" for k in range(1, 5)), "exact 1", "exact 2", "exact 3", "exact"]
    # The full data (the very tensors) is back.
    assert model.train_inputs[0] is x and model.train_targets is y


@pytest.mark.parametrize("budget", [12.5, 30.5])
def test_the_exact_subsample_start_ends_at_its_share_of_a_mocked_clocks_budget(budget):
    mll = _mll(n=400, num_features=64)
    clock = _EvaluationTime(mll.model)
    stages = []
    with mock.patch("time.perf_counter", clock), mock.patch.object(fit_budget, "perf_counter", clock):
        gprf.fit_mll(mll, time_budget=budget, tune_rows=200, tune_steps=1000, callback=lambda *c: stages.append(c))
    subsample = [seconds for stage, seconds in stages if stage.startswith("exact subsample ")]
    full = [seconds for stage, seconds in stages if stage.startswith("exact ") and "subsample" not in stage]
    # One second per step: the stage stops when the next step would pass its share of the budget.
    assert (
        subsample
        and exact_route.EXACT_TUNE_SHARE * budget - 1 <= subsample[-1] <= exact_route.EXACT_TUNE_SHARE * budget
    )
    assert full and full[0] > subsample[-1] and budget - 1 <= stages[-1][1] <= budget


@pytest.mark.parametrize(
    ("n", "tune_rows", "size"), [(2500, None, 2000), (2500, 5000, 2000), (2500, 700, 700), (1500, None, None)]
)
def test_the_subsample_start_takes_at_most_2000_rows_and_is_skipped_when_it_would_hold_them_all(n, tune_rows, size):
    mll = _mll(n=n, num_features=16)
    sizes = []

    def recording(mll):
        sizes.append(mll.model.train_targets.numel())
        return _loss(mll)

    with mock.patch("gprf.fitting.recipe._loss", side_effect=recording):
        gprf.fit_mll(mll, tune_rows=tune_rows, tune_steps=1, finish_steps=0)
    assert sizes == ([] if size is None else [size])


def test_a_one_row_subsample_start_still_ends_at_finite_hyperparameters_that_predict():
    mll = _mll(n=300)
    gprf.fit_mll(mll, tune_rows=1, tune_steps=3, finish_steps=2)
    assert all(torch.isfinite(value).all() for value in parameter_values(mll))
    with torch.no_grad():
        prediction = mll.model(mll.model.train_inputs[0][:5])
    assert torch.isfinite(prediction.mean).all() and (prediction.variance > 0).all()


def test_an_unknown_exact_start_is_a_clear_error():
    with pytest.raises(ValueError, match="exact_start must be 'subsample' or 'surrogate'"):
        gprf.fit_mll(_mll(), exact_start="warm")


@pytest.mark.parametrize(("user_setting", "expected"), [(None, 10), (6, 6)])
def test_exact_steps_take_at_most_ten_lanczos_iterations_or_the_users_fewer(user_setting, expected):
    mll = _mll()
    seen = []

    def recording(mll):
        if holds_preconditioned_kernel(mll.model):
            seen.append(gpytorch.settings.max_lanczos_quadrature_iterations.value())
        return _loss(mll)

    setting = (
        contextlib.nullcontext() if user_setting is None else gpytorch.settings.max_lanczos_quadrature_iterations(6)
    )
    with setting, mock.patch("gprf.fitting.recipe._loss", side_effect=recording):
        gprf.fit_mll(mll, finish_steps=2)
    assert seen == [expected, expected]
    assert gpytorch.settings.max_lanczos_quadrature_iterations.value() == 20  # GPyTorch's default, restored


def test_a_step_that_cannot_be_evaluated_ends_the_fit_at_the_last_point_evaluated():
    mll = _mll()
    calls, points = {"n": 0}, []

    def failing_third(mll):
        value = _loss(mll)
        if not holds_preconditioned_kernel(mll.model):  # the surrogate's recipe
            return value
        calls["n"] += 1
        points.append(parameter_values(mll))
        return value * float("nan") if calls["n"] == 3 else value

    with mock.patch("gprf.fitting.recipe._loss", side_effect=failing_third):
        with pytest.warns(FitFallbackWarning, match="exact step 3 could not be evaluated"):
            gprf.fit_mll(mll, finish_steps=10)
    assert calls["n"] == 3
    for value, expected in zip(parameter_values(mll), points[1], strict=True):
        assert torch.equal(value, expected)


def _warning_at(step_number, message, category):
    """A loss that warns ``message`` at the exact route's ``step_number``-th evaluation; returns it and the points."""
    calls, points = {"n": 0}, []

    def loss(mll):
        value = _loss(mll)
        if holds_preconditioned_kernel(mll.model):  # not the surrogate's recipe
            calls["n"] += 1
            points.append(parameter_values(mll))
            if calls["n"] == step_number:
                warnings.warn(message, category, stacklevel=2)
        return value

    return loss, calls, points


_UNCONVERGED = "CG terminated in 1000 iterations with average residual norm 59620.2 which is larger than the tolerance"


@pytest.mark.parametrize(
    ("step", "message", "point"),
    [
        (3, "exact step 3 could not be evaluated.*did not converge", 1),  # the last converged point
        (1, "first exact step could not be evaluated.*the point the stage before reached", 0),  # the surrogate's
    ],
    ids=["later-step", "first-step"],
)
def test_unconverged_conjugate_gradients_end_the_fit_at_the_last_converged_point(step, message, point):
    mll = _mll()
    loss, calls, points = _warning_at(step, _UNCONVERGED, NumericalWarning)
    with mock.patch("gprf.fitting.recipe._loss", side_effect=loss):
        with pytest.warns(FitFallbackWarning, match=message):
            gprf.fit_mll(mll, finish_steps=10)
    assert calls["n"] == step
    for value, expected in zip(parameter_values(mll), points[point], strict=True):
        assert torch.equal(value, expected)


def test_other_warnings_of_an_exact_step_are_passed_on_and_do_not_end_the_fit():
    mll = _mll()
    loss, calls, _ = _warning_at(2, "a warning of the user's own", UserWarning)
    with mock.patch("gprf.fitting.recipe._loss", side_effect=loss):
        with pytest.warns(UserWarning, match="a warning of the user's own"):
            gprf.fit_mll(mll, finish_steps=4)
    assert calls["n"] == 4


def test_conjugate_gradients_above_the_cholesky_size_in_float32():
    """Above max_cholesky_size the exact steps take preconditioned CG, never the dense matrix, in float32 too (where
    the preconditioner's Gram gets float64 products), without a warning."""
    mll = _mll(n=1000, num_features=64, dtype=torch.float32, preconditioner="nystrom")
    stages = []
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # DenseCovarianceWarning among them
        gprf.fit_mll(mll, tune_rows=300, tune_steps=10, finish_steps=3, callback=lambda stage, _: stages.append(stage))
    assert stages[-4:] == ["exact 1", "exact 2", "exact 3", "exact"]
    assert all(torch.isfinite(value).all() for value in parameter_values(mll))


@pytest.mark.parametrize(
    ("likelihood", "name"),
    [(BernoulliLikelihood(), "BernoulliLikelihood"), (MultitaskGaussianLikelihood(2), "MultitaskGaussianLikelihood")],
)
def test_a_likelihood_other_than_a_gaussian_one_is_a_clear_error(likelihood, name):
    mll = _mll()
    mll.likelihood = likelihood  # GPyTorch refuses non-Gaussian likelihoods when the mll is built
    with pytest.raises(TypeError, match=f"needs a GaussianLikelihood or FixedNoiseGaussianLikelihood .* got {name}"):
        gprf.fit_mll(mll)
