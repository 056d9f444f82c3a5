"""Adversarial use of in-memory prediction (``model.eval(); model(x)``) with gprf kernels: empty, non-finite and
mistyped test inputs, hyperparameters and draws changed after the prediction cache was built, and float32 against
float64 at small noise."""

from __future__ import annotations

import math

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from linear_operator.utils.errors import NotPSDError

from gprf import settings
from gprf.exceptions import IndefiniteKernelError
from gprf.features import delta_gaussian_spectrum
from gprf.kernels import LocalizedMaclaurinKernel, RandomFourierKernel, SignedRandomFeatureKernel
from gprf.testing import ExactGPModel, regression_data


def _model(n=60, dtype=torch.float64, noise=0.05, lengthscale=0.4, seed=0):
    x, y = (t.to(dtype) for t in regression_data(n=n, d=2))  # the same data in either dtype
    likelihood = gpytorch.likelihoods.GaussianLikelihood(noise_constraint=gpytorch.constraints.GreaterThan(1e-9))
    model = ExactGPModel(x, y, likelihood, ScaleKernel(RandomFourierKernel(32, num_dims=2, seed=seed))).to(dtype)
    model.likelihood.noise = noise
    model.covar_module.base_kernel.lengthscale = lengthscale
    return model.eval()


def _predict(model, x):
    with torch.no_grad(), gpytorch.settings.min_variance(float_value=1e-30, double_value=1e-30):
        prediction = model(x)
        return prediction.mean, prediction.variance


def _test_points(dtype=torch.float64):
    return torch.rand(7, 2, generator=torch.Generator().manual_seed(1), dtype=dtype)


def test_no_test_points_give_empty_predictions():
    mean, variance = _predict(_model(), torch.zeros(0, 2, dtype=torch.float64))
    assert mean.shape == (0,) and variance.shape == (0,)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_test_points_are_refused_naming_the_rows(bad):
    x = _test_points()
    x[5, 0] = bad
    with pytest.raises(ValueError, match=r"NaN or infinite inputs in 1 of 7 rows \(rows 5\)"):
        _predict(_model(), x)


def test_test_points_of_another_width_fail_in_gpytorch_as_documented():
    """GPyTorch's ExactGP concatenates training and test inputs before any kernel runs (documented limit)."""
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        _predict(_model(), torch.rand(3, 3, dtype=torch.float64))


def test_float32_test_points_of_a_float64_model_predict_in_float64():
    model, x = _model(), _test_points()
    mean32, variance32 = _predict(model, x.float())
    mean64, variance64 = _predict(model, x.float().double())
    assert mean32.dtype == torch.float64
    torch.testing.assert_close((mean32, variance32), (mean64, variance64))


@pytest.mark.parametrize("change", ["lengthscale", "resample", "optimizer_step", "load_state_dict"])
def test_a_change_seen_by_gprf_rebuilds_the_cache(change):
    """After the first prediction, a change gprf sees gives the prediction of a model built with the change."""
    model, x = _model(), _test_points()
    _predict(model, x)
    reference = _model()
    if change == "lengthscale":
        model.covar_module.base_kernel.lengthscale = 0.7
        reference.covar_module.base_kernel.lengthscale = 0.7
    elif change == "resample":
        for target in (model, reference):
            target.covar_module.base_kernel.resample_features(torch.Generator().manual_seed(5))
    elif change == "optimizer_step":
        with torch.no_grad():
            for target in (model, reference):
                target.covar_module.raw_outputscale.add_(0.5)
    else:
        other = _model(lengthscale=0.9, seed=3)
        model.load_state_dict(other.state_dict())
        reference = other
    torch.testing.assert_close(_predict(model, x), _predict(reference, x), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("write", ["targets", "inputs"])
def test_in_place_writes_to_the_training_data_rebuild_the_cache(write):
    model, x = _model(), _test_points()
    _predict(model, x)
    with torch.no_grad():
        if write == "targets":
            model.train_targets.mul_(2)
        else:
            model.train_inputs[0].mul_(0.5)
    reference = _model()
    reference.set_train_data(model.train_inputs[0].clone(), model.train_targets.clone(), strict=False)
    torch.testing.assert_close(_predict(model, x), _predict(reference, x), rtol=1e-10, atol=1e-12)


def _set_with_gpytorch_setter(model, change):
    if change == "outputscale":
        model.covar_module.outputscale = 3.0
    else:
        model.likelihood.noise = 0.5


@pytest.mark.parametrize("change", ["outputscale", "noise"])
def test_gpytorch_setters_write_past_the_version_counters_as_documented(change):
    """GPyTorch's own setters write through ``.data``; the documented fix is train() then eval()."""
    model, x = _model(), _test_points()
    before = _predict(model, x)
    _set_with_gpytorch_setter(model, change)
    reference = _model()
    _set_with_gpytorch_setter(reference, change)
    expected = _predict(reference, x)
    assert not torch.allclose(before[0], expected[0])
    assert not torch.allclose(_predict(model, x)[0], expected[0])  # the documented stale cache
    model.train()
    model.eval()
    torch.testing.assert_close(_predict(model, x), expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("noise", [1e-2, 1e-4])
def test_float32_predictions_stay_within_the_rounding_of_float64_at_small_noise(noise):
    """A float32 model of the same data and draws as a float64 model predicts within 1e-6 of its largest mean and
    variance at noise down to 1e-4 (the Gram is formed in float64 from the float32 features)."""
    x = _test_points()
    model32 = _model(dtype=torch.float32, noise=noise, lengthscale=0.3)
    model64 = _model(dtype=torch.float64, noise=noise, lengthscale=0.3)
    mean32, variance32 = (t.double() for t in _predict(model32, x.float()))
    mean64, variance64 = _predict(model64, x)
    assert float((mean32 - mean64).abs().max() / mean64.abs().max()) < 1e-6
    assert float((variance32 - variance64).abs().max() / variance64.abs().max()) < 1e-6
    assert mean32.isfinite().all() and (variance32 > 0).all()


def test_a_fantasy_model_refuses_predicting_after_a_resample():
    model, x = _model(), _test_points()
    _predict(model, x)
    fantasy = model.get_fantasy_model(x[:2], torch.zeros(2, dtype=torch.float64))
    fantasy.covar_module.base_kernel.resample_features(torch.Generator().manual_seed(7))
    with pytest.raises(RuntimeError, match=r"model.train\(\)"):
        _predict(fantasy, x)


@pytest.mark.parametrize("noise", [1e-2, 1e-4, 1e-6])
def test_the_float32_marginal_likelihood_stays_within_the_documented_1e3_of_float64(noise):
    """At N = 300, F = 64 (documented in the pitfalls: within 1e-3 of its value down to noise 1e-6)."""
    values = []
    for dtype in (torch.float32, torch.float64):
        model = _model(n=300, dtype=dtype, noise=noise, lengthscale=0.3)
        model.train()
        x, y = model.train_inputs[0], model.train_targets
        with torch.no_grad():
            values.append(float(gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)(model(x), y)))
    assert abs(values[0] - values[1]) <= 1e-3 * abs(values[1])


def test_a_noise_below_the_likelihoods_constraint_is_refused_by_gpytorch():
    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    with pytest.raises(RuntimeError, match="out of bounds"):
        likelihood.noise = 0.0


@pytest.mark.parametrize(("factor_dtype", "fails"), [(torch.float32, True), (torch.float64, False)])
def test_float32_factors_at_tiny_noise_fail_loudly_as_documented(factor_dtype, fails):
    model = _model(n=300, dtype=torch.float32, noise=1e-6, lengthscale=0.3)
    with settings.factor_dtype(factor_dtype):
        if fails:
            with pytest.raises(NotPSDError, match="not positive definite"):
                _predict(model, _test_points(torch.float32))
        else:
            mean, variance = _predict(model, _test_points(torch.float32))
            assert bool(mean.isfinite().all()) and bool((variance > 0).all())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"centers": torch.rand(4, 3)}, r"centers must be a tensor of shape \(K, 2\) with K >= 1, got \(4, 3\)"),
        ({"centers": torch.rand(0, 2)}, r"with K >= 1, got \(0, 2\)"),
        ({"centers": torch.full((4, 2), math.nan)}, "centers must hold finite real floating-point values"),
        ({"centers": "cluster", "threshold": 0.0}, "threshold must be a positive number of lengthscales"),
        ({"centers": "cluster", "threshold": math.nan}, "threshold must be a positive number of lengthscales"),
        ({"centers": "foo"}, "centers must be 'test', 'cluster' or a tensor"),
        ({"threshold": 1.0}, "threshold only applies to centers='cluster'"),
    ],
)
def test_localized_prediction_refuses_bad_centres(kwargs, match):
    with pytest.raises(ValueError, match=match):
        kernel = LocalizedMaclaurinKernel(16, num_dims=2, seed=0, **kwargs)
        x, y = regression_data(n=30, d=2)
        model = ExactGPModel(x, y, gpytorch.likelihoods.GaussianLikelihood(), ScaleKernel(kernel)).double().eval()
        _predict(model, _test_points())


def test_a_signed_kernel_refuses_posterior_variances_but_gives_the_mean():
    x, y = regression_data(n=30, d=2)
    kernel = SignedRandomFeatureKernel(16, delta_gaussian_spectrum([2.0, -1.0], [1.0, 3.0]), num_dims=2, seed=0)
    model = ExactGPModel(x, y, gpytorch.likelihoods.GaussianLikelihood(), kernel).double().eval()
    with torch.no_grad():
        assert bool(model(_test_points()).mean.isfinite().all())
        with pytest.raises(IndefiniteKernelError, match="A posterior variance needs a positive semi-definite"):
            _ = model(_test_points()).variance
