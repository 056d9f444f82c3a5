"""``gprf.fit_mll``: the nested small-F recipe raises the full marginal likelihood and leaves the model as it was."""

from __future__ import annotations

import contextlib
import math
from unittest import mock

import pytest
import torch
from gpytorch.constraints import GreaterThan
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood

import gprf
from gprf.exceptions import BudgetWarning
from gprf.fitting.recipe import FIT_MLL_OPTIONS, _lbfgs, _loss
from gprf.fitting.scale_fit import supports_exact_scale_fit
from gprf.kernels import FeatureSumKernel, QuadratureKernel, RandomFourierKernel
from tests.helpers.models import scaled_gp, training_mll


def _data(n: int, d: int = 3, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=generator, dtype=torch.float64) * 4 - 2
    f = torch.sin(2 * x[:, 0]) * torch.cos(x[:, 1]) + 0.5 * x[:, 2]
    return x, f + 0.1 * torch.randn(n, generator=generator, dtype=torch.float64)


def _model(n: int = 1500, num_features: int = 256, likelihood=None):
    x, y = _data(n)
    kernel = RandomFourierKernel(num_features, num_dims=3, ard_num_dims=3, sampler="orthogonal", seed=1)
    likelihood = GaussianLikelihood() if likelihood is None else likelihood
    model = scaled_gp(x, y, kernel, likelihood).double()
    return ExactMarginalLogLikelihood(model.likelihood, model)


def test_nested_recipe_raises_the_full_marginal_likelihood_and_restores_the_model():
    mll = _model()
    model = mll.model
    feature_map, inputs, targets = (
        model.covar_module.base_kernel.feature_map,
        model.train_inputs[0],
        model.train_targets,
    )
    before = training_mll(mll)
    stages = []
    returned = gprf.fit_mll(
        mll, tune_features=64, tune_rows=500, tune_steps=60, callback=lambda stage, _: stages.append(stage)
    )
    assert returned is mll and not mll.training and not model.training
    after = training_mll(mll)
    # The initial hyperparameters (lengthscale 0.69, noise 0.69) are far from the data's (noise 0.01).
    assert after > before + 0.5, (before, after)
    # The model's own draw and training data are back in place.
    assert model.covar_module.base_kernel.feature_map is feature_map
    assert model.train_inputs[0] is inputs and model.train_targets is targets
    assert stages[:2] == ["tune 1", "tune 2"] and stages[-2:] == ["tune", "scale"]
    assert model.likelihood.noise.item() == pytest.approx(0.01, rel=0.5)


def test_scale_hyperparameters_are_at_their_optimum_after_the_fit():
    mll = _model()
    gprf.fit_mll(mll, tune_features=64, tune_rows=500, tune_steps=30)
    model = mll.model
    mll.train()
    loss = -mll(model(*model.train_inputs), model.train_targets)
    scale_parameters = [
        model.covar_module.raw_outputscale,
        model.likelihood.noise_covar.raw_noise,
        model.mean_module.raw_constant,
    ]
    gradients = torch.autograd.grad(loss, scale_parameters)
    for gradient in gradients:
        assert gradient.abs().max() < 1e-4, gradients


def test_small_problems_take_full_lbfgs_to_a_stationary_point():
    mll = _model(n=60, num_features=64)
    stages = []
    gprf.fit_mll(mll, callback=lambda stage, _: stages.append(stage))
    assert "tune 1" not in stages and stages[-1] == "finish"
    model = mll.model
    mll.train()
    loss = -mll(model(*model.train_inputs), model.train_targets)
    gradients = torch.autograd.grad(loss, [p for p in mll.parameters() if p.requires_grad])
    assert max(g.abs().max().item() for g in gradients) < 1e-3


def test_fewer_points_than_features_take_full_lbfgs_whatever_tune_features():
    """N < F: every full step takes the N x N route, so the recipe does not nest (whose small-F noise stays too large
    in Bayesian optimisation); forced onto the F x F route, the same model is nested again."""
    for route, nests in (("auto", False), ("features", True)):
        mll = _model(n=60, num_features=256)
        stages, sizes = [], []

        def record(stage: str, _: float, stages=stages, sizes=sizes, mll=mll) -> None:
            stages.append(stage)
            sizes.append(mll.model.covar_module.base_kernel.num_features)

        with gprf.settings.covariance_route(route):
            gprf.fit_mll(mll, tune_features=64, tune_steps=5, callback=record)
        assert ("tune 1" in stages) == nests and (stages[-1] == "finish") != nests
        assert (min(sizes) == 64) == nests and mll.model.covar_module.base_kernel.num_features == 256
    mll = _model(n=60, num_features=256)
    gprf.fit_mll(mll, tune_features=64)
    model = mll.model
    mll.train()
    loss = -mll(model(*model.train_inputs), model.train_targets)
    gradients = torch.autograd.grad(loss, [p for p in mll.parameters() if p.requires_grad])
    assert max(g.abs().max().item() for g in gradients) < 1e-3


def test_a_time_budget_stops_tuning_early():
    mll = _model()
    stages = []
    with pytest.warns(BudgetWarning, match="keep the first 64 features"):
        gprf.fit_mll(
            mll, time_budget=1e-6, tune_features=64, tune_rows=500, callback=lambda stage, _: stages.append(stage)
        )
    # The first step already spends the tuning share of the budget; the exact refit still runs, at the tuning size.
    assert stages == ["tune 1", "tune", "scale"]
    assert mll.model.covar_module.base_kernel.num_features == 64


class _EvaluationClock:
    """A fit clock whose seconds are marginal-likelihood evaluations: ``budget`` minus those made so far are left."""

    def __init__(self, model, budget: int):
        self.evaluations, self.budget = 0, budget
        forward = model.forward

        def counted(*args):
            self.evaluations += 1
            return forward(*args)

        model.forward = counted

    def now(self) -> float:
        return float(self.evaluations)

    def left(self) -> float:
        return float(self.budget - self.evaluations)


def test_finishing_stops_before_an_evaluation_the_budget_cannot_cover_and_keeps_the_best_point():
    mll = _model(n=200, num_features=32)
    model = mll.model
    clock = _EvaluationClock(model, budget=3)
    mll.train()
    losses = []
    # Evaluations are estimated at half a "second" each: the fourth would start with none left.
    _lbfgs(mll, steps=50, clock=clock, estimate=0.5, report=losses.append)
    assert clock.evaluations == 3
    # A line search cut short leaves L-BFGS at a trial point: the parameters are set back to the best one seen.
    with torch.no_grad():
        final = _loss(mll).item()
    assert final == pytest.approx(losses[-1].item(), rel=1e-12)


class _FailingModel:
    """Makes a model's forward raise like a lengthscale underflowing to zero (non-finite inputs) from evaluation
    ``failing`` on."""

    def __init__(self, model, failing: int):
        self.evaluations = 0
        forward = model.forward

        def failing_forward(*args):
            self.evaluations += 1
            if self.evaluations >= failing:
                raise ValueError("RandomFourierFeatures received NaN or infinite inputs")
            return forward(*args)

        model.forward = failing_forward


@pytest.mark.parametrize(
    ("failing", "loss_value"), [(3, None), (3, math.nan)], ids=["raising trial point", "non-finite loss"]
)
def test_finishing_ends_at_the_best_point_when_a_trial_point_cannot_be_evaluated(failing, loss_value):
    mll = _model(n=200, num_features=32)
    mll.train()
    if loss_value is None:
        _FailingModel(mll.model, failing)
        context = contextlib.nullcontext()
    else:
        calls = {"n": 0}

        def loss(mll):
            calls["n"] += 1
            return _loss(mll) * (loss_value if calls["n"] >= failing else 1.0)

        context = mock.patch("gprf.fitting.recipe._loss", side_effect=loss)
    losses = []
    with context:
        _lbfgs(mll, steps=50, clock=_EvaluationClock(mll.model, budget=100), estimate=0.0, report=losses.append)
    assert math.isfinite(losses[-1].item())
    del mll.model.forward  # the class's own forward again
    with torch.no_grad():
        assert _loss(mll).item() == pytest.approx(losses[-1].item(), rel=1e-12)  # back at the best point


def test_a_starting_point_that_cannot_be_evaluated_is_the_callers_error():
    mll = _model(n=200, num_features=32)
    mll.train()
    _FailingModel(mll.model, failing=1)
    with pytest.raises(ValueError, match="NaN or infinite inputs"):
        _lbfgs(mll, steps=5, clock=_EvaluationClock(mll.model, budget=100), estimate=0.0, report=lambda loss: None)


def test_kernels_without_nested_draws_tune_at_full_size():
    x, y = _data(800)
    model = scaled_gp(x, y, QuadratureKernel(num_dims=3, ard_num_dims=3, num_rules=2)).double()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    before = training_mll(mll)
    gprf.fit_mll(mll, tune_features=8, tune_rows=300, tune_steps=20)
    assert training_mll(mll) > before


def test_product_factors_keep_their_draws_while_the_other_summands_are_nested():
    x, y = _data(800)
    rbf = RandomFourierKernel(64, num_dims=1, active_dims=[0], seed=2)
    matern = RandomFourierKernel(64, num_dims=2, kernel="matern52", active_dims=[1, 2], seed=3)
    linear_part = RandomFourierKernel(64, num_dims=3, seed=4)
    kernel = ScaleKernel(rbf * matern) + ScaleKernel(linear_part)
    model = scaled_gp(x, y, kernel).double()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    sizes = []

    def record(stage: str, _: float) -> None:
        if stage == "tune 1":
            sizes.extend([rbf.num_features, matern.num_features, linear_part.num_features])

    before = training_mll(mll)
    gprf.fit_mll(mll, tune_features=16, tune_rows=300, tune_steps=20, callback=record)
    assert sizes == [64, 64, 16]  # the product pairs its factors' columns: they stay whole
    assert [rbf.num_features, matern.num_features, linear_part.num_features] == [64, 64, 64]
    assert training_mll(mll) > before


class _PairedSum(FeatureSumKernel):
    """A kernel from outside the package that combines its parts' columns and says so (the extension point)."""

    def part_draws_nest(self) -> bool:
        return False


def _sizes_at_the_first_tuning_step(kernel, owners) -> list[int]:
    x, y = _data(800)
    model = scaled_gp(x, y, kernel).double()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    sizes = []

    def record(stage: str, _: float) -> None:
        if stage == "tune 1":
            sizes.extend(owner.num_features for owner in owners)

    gprf.fit_mll(mll, tune_features=16, tune_rows=300, tune_steps=2, callback=record)
    assert [owner.num_features for owner in owners] == [64] * len(owners)  # the full draws are back
    return sizes


def test_kernels_that_combine_their_parts_columns_keep_their_draws_whatever_their_type():
    kept = [RandomFourierKernel(64, num_dims=3, seed=seed) for seed in (2, 3)]
    nested = RandomFourierKernel(64, num_dims=3, seed=4)
    kernel = FeatureSumKernel(ScaleKernel(_PairedSum(*kept)), ScaleKernel(nested))
    assert _sizes_at_the_first_tuning_step(kernel, [*kept, nested]) == [64, 64, 16]


def test_a_factor_shared_with_a_summand_keeps_its_draw():
    rbf = RandomFourierKernel(64, num_dims=1, active_dims=[0], seed=2)
    matern = RandomFourierKernel(64, num_dims=2, kernel="matern52", active_dims=[1, 2], seed=3)
    kernel = ScaleKernel(rbf * matern) + ScaleKernel(rbf)  # rbf is a factor and, the same object, a summand
    assert _sizes_at_the_first_tuning_step(kernel, [rbf, matern]) == [64, 64]


def test_the_exact_refit_is_decided_once_per_fit():
    with mock.patch("gprf.fitting.recipe.supports_exact_scale_fit", wraps=supports_exact_scale_fit) as decide:
        gprf.fit_mll(_model(n=600, num_features=64), tune_features=16, tune_rows=300, tune_steps=2, finish_steps=2)
    assert decide.call_count == 1


def test_observed_noise_skips_the_exact_refit():
    x, y = _data(700)
    likelihood = FixedNoiseGaussianLikelihood(noise=torch.full((700,), 0.01, dtype=torch.float64))
    kernel = RandomFourierKernel(128, num_dims=3, ard_num_dims=3, seed=1)
    model = scaled_gp(x, y, kernel, likelihood).double()
    mll = ExactMarginalLogLikelihood(likelihood, model)
    stages = []
    before = training_mll(mll)
    gprf.fit_mll(mll, tune_features=32, tune_rows=300, tune_steps=20, callback=lambda stage, _: stages.append(stage))
    assert "scale" not in stages and training_mll(mll) > before


def test_progress_goes_to_stderr_only_when_asked(capsys):
    gprf.fit_mll(_model(n=300, num_features=32), tune_steps=2)
    assert capsys.readouterr().err == ""
    gprf.fit_mll(_model(n=300, num_features=32), tune_steps=2, progress=True)
    err = capsys.readouterr().err
    assert "[gprf.fit_mll]" in err and "done in" in err


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="ExactMarginalLogLikelihood"):
        gprf.fit_mll(object())
    with pytest.raises(ValueError, match="time_budget"):
        gprf.fit_mll(_model(n=50, num_features=16), time_budget=0.0)
    with pytest.raises(ValueError, match="tune_steps"):
        gprf.fit_mll(_model(n=50, num_features=16), tune_steps=-1)


def test_the_option_names_are_the_keyword_arguments():
    assert FIT_MLL_OPTIONS == (
        "time_budget",
        "grow",
        "exact_start",
        "tune_features",
        "tune_rows",
        "tune_steps",
        "lr",
        "finish_steps",
        "seed",
        "progress",
        "callback",
    )


def test_bounds_without_a_transform_are_kept():
    """BoTorch builds constraints without a transform (its optimiser keeps the bounds): the recipe keeps them too."""
    x, y = _data(1200)
    kernel = RandomFourierKernel(
        128, num_dims=3, ard_num_dims=3, seed=1, lengthscale_constraint=GreaterThan(1.0, transform=None)
    )
    kernel.raw_lengthscale.data.fill_(2.0)
    model = scaled_gp(x, y, kernel).double()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    gprf.fit_mll(mll, tune_features=32, tune_rows=400, tune_steps=40)
    lengthscale = model.covar_module.base_kernel.lengthscale
    # The data want a lengthscale below 1 in the first two inputs: the bound is active there and nowhere crossed.
    assert bool((lengthscale >= 1.0).all()) and lengthscale.min().item() == 1.0


def test_fewer_points_than_features_fit_on_the_device_as_on_the_cpu(device):
    """The small route (full L-BFGS on the N x N route) on the device: the model stays there and reaches the CPU's
    optimum (float64 on both; the products round differently, L-BFGS stops at the same stationary point)."""
    start = training_mll(_model(n=60, num_features=256))
    fitted = []
    for where in (torch.device("cpu"), device):
        mll = _model(n=60, num_features=256).to(where)
        gprf.fit_mll(mll)
        assert {parameter.device.type for parameter in mll.parameters()} == {where.type}
        fitted.append(training_mll(mll))
    assert fitted[0] > start + 0.1
    assert fitted[1] == pytest.approx(fitted[0], rel=1e-6)
