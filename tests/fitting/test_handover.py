"""After ``fit_mll`` the model predicts from the refit's Gram matrix: the first prediction forms none and equals a
fresh computation; any change after the fit, or a prediction that wants gradients, builds the cache anew."""

from __future__ import annotations

import importlib
from unittest import mock

import gpytorch
import pytest
import torch
from gpytorch.mlls import ExactMarginalLogLikelihood

import gprf
from gprf.fitting.end_point import parameter_values
from gprf.fitting.handover import RefitGram, end_with_refit
from gprf.fitting.scale_fit import fit_scale_with_sums
from gprf.kernels import RandomFourierKernel
from gprf.prediction import ComplexFeaturePredictionStrategy, FeatureSpacePredictionStrategy
from tests.helpers.models import scaled_gp

# Where every feature-space factorisation forms its Gram matrix (the module: gprf.linalg re-exports the names).
capacitance = importlib.import_module("gprf.linalg.capacitance")


def _data(n: int, dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 3, generator=generator, dtype=torch.float64) * 4 - 2
    y = torch.sin(2 * x[:, 0]) * torch.cos(x[:, 1]) + 0.5 * x[:, 2] + 0.1 * torch.randn(n, generator=generator)
    return x.to(dtype), y.to(dtype)


def _fitted(dtype: torch.dtype = torch.float64, **options) -> ExactMarginalLogLikelihood:
    x, y = _data(1500, dtype)
    kernel = RandomFourierKernel(256, num_dims=3, ard_num_dims=3, sampler="orthogonal", seed=1)
    model = scaled_gp(x, y, kernel).to(dtype)
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    gprf.fit_mll(mll, tune_features=64, tune_rows=500, tune_steps=10, **options)
    return mll


def _predict(model: gpytorch.models.ExactGP, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        output = model(x)
        return output.mean, output.variance


def _fresh(model: gpytorch.models.ExactGP, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The prediction of a cache built now (``train()`` drops the model's strategy)."""
    model.train()
    model.eval()
    return _predict(model, x)


def _counting_grams():
    return mock.patch.object(capacitance, "weighted_sums", wraps=capacitance.weighted_sums)


# float32 models: the 1e-6 relative accuracy of their caches, and two units in the last place of outputs of order 1.
@pytest.mark.parametrize(
    ("dtype", "rtol", "atol"),
    [(torch.float64, 1e-10, 1e-12), (torch.float32, 1e-6, 2 * torch.finfo(torch.float32).eps)],
)
def test_the_first_prediction_after_the_fit_forms_no_gram_and_equals_a_fresh_one(dtype, rtol, atol):
    mll = _fitted(dtype)
    model = mll.model
    test_x, _ = _data(200, dtype, seed=1)
    assert isinstance(model.prediction_strategy, FeatureSpacePredictionStrategy)
    with _counting_grams() as grams:
        handed_over = _predict(model, test_x)
        assert grams.call_count == 0
        fresh = _fresh(model, test_x)
        assert grams.call_count == 1  # the counter sees the Gram matrix a cache forms
    for first, second in zip(handed_over, fresh, strict=True):
        torch.testing.assert_close(first, second, rtol=rtol, atol=atol)


def test_a_hyperparameter_changed_after_the_fit_drops_the_handed_over_cache():
    mll = _fitted()
    model = mll.model
    test_x, _ = _data(50, torch.float64, seed=1)
    with torch.no_grad():
        model.likelihood.noise_covar.raw_noise.add_(0.5)  # an in-place write, as an optimizer step makes
    with _counting_grams() as grams:
        changed = _predict(model, test_x)
        assert grams.call_count == 1
    for first, second in zip(changed, _fresh(model, test_x), strict=True):
        torch.testing.assert_close(first, second, rtol=1e-10, atol=1e-12)


def test_a_prediction_that_keeps_the_graph_builds_its_own_cache():
    mll = _fitted()
    model = mll.model
    test_x, _ = _data(20, torch.float64, seed=1)
    with _counting_grams() as grams, gpytorch.settings.detach_test_caches(False):
        mean = model(test_x).mean
        assert grams.call_count == 1
    (gradient,) = torch.autograd.grad(mean.sum(), model.likelihood.noise_covar.raw_noise)
    assert gradient.abs().item() > 0  # the training cache depends on the noise


def test_sums_of_other_hyperparameters_are_not_handed_over():
    """Finishing L-BFGS steps after the last refit move the lengthscales: its Gram matrix is stale by then."""
    x, y = _data(300, torch.float64)
    model = scaled_gp(x, y, RandomFourierKernel(64, num_dims=3, ard_num_dims=3, seed=1)).double()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    _, sums = fit_scale_with_sums(mll)
    refit = RefitGram.after_refit(mll, sums)
    assert refit.is_current(mll)
    with torch.no_grad():
        model.covar_module.base_kernel.raw_lengthscale.mul_(1.1)
    assert not refit.is_current(mll)
    assert not end_with_refit(mll, refit, [("the start", parameter_values(mll))])
    # The end check built the cache once and dropped it; the model predicts.
    assert not mll.training and model.prediction_strategy is None
    assert torch.isfinite(_predict(model, x[:5])[1]).all()


def test_a_current_refit_is_handed_over_at_the_end():
    x, y = _data(300, torch.float64)
    model = scaled_gp(x, y, RandomFourierKernel(64, num_dims=3, ard_num_dims=3, seed=1)).double()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    _, sums = fit_scale_with_sums(mll)
    assert end_with_refit(mll, RefitGram.after_refit(mll, sums), [])
    with _counting_grams() as grams:
        handed_over = _predict(model, x[:5])
        assert grams.call_count == 0
    for first, second in zip(handed_over, _fresh(model, x[:5]), strict=True):
        torch.testing.assert_close(first, second, rtol=1e-10, atol=1e-12)


def test_strategies_that_factor_other_features_do_not_take_the_roots_posterior():
    assert FeatureSpacePredictionStrategy.adopts_root_posterior
    assert not ComplexFeaturePredictionStrategy.adopts_root_posterior


@pytest.mark.parametrize("num_outputs", [1, 2])
def test_botorch_models_fitted_by_fit_gpytorch_mll_predict_from_the_refit(num_outputs):
    pytest.importorskip("botorch")
    from botorch.fit import fit_gpytorch_mll

    from tests.botorch.conftest import make_botorch_model

    model = make_botorch_model(num_outputs=num_outputs, n=600, num_features=256)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model), tune_features=64, tune_rows=200, tune_steps=5)
    test_x = torch.rand(30, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64) * 2 - 1
    with _counting_grams() as grams, torch.no_grad():
        posterior = model.posterior(test_x)
        handed_over = (posterior.mean, posterior.variance)
        assert grams.call_count == 0
        model.train()
        posterior = model.posterior(test_x)
        assert grams.call_count >= 1
    for first, second in zip(handed_over, (posterior.mean, posterior.variance), strict=True):
        torch.testing.assert_close(first, second, rtol=1e-10, atol=1e-12)
