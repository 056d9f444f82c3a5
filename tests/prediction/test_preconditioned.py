"""PreconditionedPredictionStrategy: predictions of an exact GP with PreconditionedKernel equal the dense exact GP's
(Cholesky route, CG route, with BoTorch's fast-computation flags off, and their gradients in the test inputs); fast
predictive variances are never below the exact ones and sharpen with the preconditioner's subspace; mean and variances
share one preconditioner; fantasy models predict as the exact GP's; a likelihood without diagonal Gaussian noise is
refused."""

from __future__ import annotations

import warnings

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from linear_operator import settings as linop_settings

from gprf.exceptions import DenseCovarianceWarning
from gprf.kernels import PreconditionedKernel
from gprf.kernels import preconditioned_kernel as preconditioned_kernel_module
from gprf.prediction import PreconditionedPredictionStrategy
from gprf.testing import ExactGPModel, regression_data

NUM_TRAIN = 300


def models(num_features=128, preconditioner="random_features"):
    """The same exact GP twice: with PreconditionedKernel and with its plain base kernel."""
    x, y = regression_data(NUM_TRAIN, d=2)
    base = ScaleKernel(RBFKernel(ard_num_dims=2)).double()
    base.outputscale = 1.5
    base.base_kernel.lengthscale = torch.tensor([0.25, 0.4], dtype=torch.float64)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    likelihood.noise = 0.01
    kernel = PreconditionedKernel(base, num_features, preconditioner=preconditioner, seed=0)
    preconditioned = ExactGPModel(x, y, likelihood, kernel).double()
    plain = ExactGPModel(x, y, likelihood, base).double()
    for model in (preconditioned, plain):
        model.mean_module.constant.data.fill_(0.3)
        model.eval()
    return preconditioned, plain


def test_test_points():
    return torch.rand(25, 2, generator=torch.Generator().manual_seed(7), dtype=torch.float64)


def dense_prediction(model, x):
    with torch.no_grad(), gpytorch.settings.max_cholesky_size(10_000):
        output = model(x)
        return output.mean, output.variance


def test_the_strategy_is_the_kernels():
    preconditioned, _ = models()
    preconditioned(test_test_points())
    assert isinstance(preconditioned.prediction_strategy, PreconditionedPredictionStrategy)


def test_predictions_by_cholesky_equal_the_exact_gp():
    preconditioned, plain = models()
    x = test_test_points()
    mean, variance = dense_prediction(preconditioned, x)
    expected_mean, expected_variance = dense_prediction(plain, x)
    torch.testing.assert_close(mean, expected_mean)
    torch.testing.assert_close(variance, expected_variance)


@pytest.mark.parametrize("botorch_flags", [False, True], ids=["gpytorch-defaults", "botorch-flags-off"])
def test_predictions_by_preconditioned_cg_equal_the_exact_gp(botorch_flags):
    preconditioned, plain = models()
    x = test_test_points()
    flags = linop_settings.fast_computations(
        covar_root_decomposition=not botorch_flags, log_prob=not botorch_flags, solves=not botorch_flags
    )
    with (
        flags,
        gpytorch.settings.max_cholesky_size(100),
        gpytorch.settings.eval_cg_tolerance(1e-6),
        warnings.catch_warnings(),
        torch.no_grad(),
    ):
        warnings.simplefilter("error", DenseCovarianceWarning)  # never the dense 300 x 300 matrix
        output = preconditioned(x)
        mean, variance = output.mean, output.variance
    expected_mean, expected_variance = dense_prediction(plain, x)
    torch.testing.assert_close(mean, expected_mean, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(variance, expected_variance, rtol=1e-4, atol=1e-5)


def test_gradients_in_the_test_inputs_equal_the_exact_gps():
    # The predictive covariance k** - A K^-1 A^T is differentiated in A (the test-train covariance) from one solve;
    # by Cholesky (300 points), so that the comparison is exact.
    preconditioned, plain = models()
    grads = []
    for model in (preconditioned, plain):
        x = test_test_points().requires_grad_(True)
        output = model(x)
        covariance = output.covariance_matrix
        grads.append(torch.autograd.grad((output.mean + covariance.diagonal().sqrt()).sum() + covariance.sum(), x)[0])
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-8, atol=1e-10)


def test_fast_variances_are_conservative_and_sharpen_with_the_subspace():
    _, plain = models()
    x = test_test_points()
    _, exact = dense_prediction(plain, x)
    errors = {}
    for kind, num_features in (("random_features", 32), ("random_features", 128), ("nystrom", NUM_TRAIN)):
        preconditioned, _ = models(num_features, kind)
        with gpytorch.settings.fast_pred_var(), gpytorch.settings.max_cholesky_size(100), torch.no_grad():
            variance = preconditioned(x).variance
        # The Rayleigh-Ritz inverse underestimates k^T K^-1 k, so variances are never below the exact ones.
        assert (variance >= exact - 1e-10).all()
        errors[kind, num_features] = (variance - exact).abs().max().item()
    # More features span more of K^-1 k here; Nystrom points on every training input span the whole space.
    assert errors["random_features", 128] < errors["random_features", 32], errors
    assert errors["nystrom", NUM_TRAIN] < 1e-8, errors


def test_mean_and_fast_variances_share_one_preconditioner(monkeypatch):
    calls = []
    original = preconditioned_kernel_module._FeatureCovariance.__call__

    def counting(self, x):
        calls.append(x.shape)
        return original(self, x)

    monkeypatch.setattr(preconditioned_kernel_module._FeatureCovariance, "__call__", counting)
    preconditioned, _ = models()
    with gpytorch.settings.fast_pred_var(), gpytorch.settings.max_cholesky_size(100), torch.no_grad():
        for shift in (0.0, 0.1):  # the second prediction reuses the caches
            assert preconditioned(test_test_points() + shift).variance.shape == (25,)
    assert calls == [torch.Size([NUM_TRAIN, 2])]


def test_a_likelihood_without_diagonal_gaussian_noise_is_refused():
    preconditioned, _ = models()
    prior = preconditioned.forward(preconditioned.train_inputs[0])
    with pytest.raises(TypeError, match="needs a Gaussian likelihood.*BernoulliLikelihood"):
        PreconditionedPredictionStrategy(
            preconditioned.train_inputs,
            prior,
            preconditioned.train_targets,
            gpytorch.likelihoods.BernoulliLikelihood(),
        )


def test_fantasy_models_predict_as_the_exact_gps():
    preconditioned, plain = models()
    x = test_test_points()
    new_x = torch.rand(3, 2, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    new_y = torch.randn(3, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    predictions = []
    for model in (preconditioned, plain):
        model(x)  # the prediction strategy that fantasies update
        with torch.no_grad():
            output = model.get_fantasy_model(new_x, new_y)(x)
            predictions.append((output.mean, output.variance))
    for actual, expected in zip(*predictions, strict=True):
        torch.testing.assert_close(actual, expected)


def mean_solve_residual(model):
    """Relative residual of the mean cache the last prediction solved, against the dense training covariance."""
    x, y = model.train_inputs[0], model.train_targets
    with torch.no_grad(), gpytorch.settings.max_cholesky_size(10_000):
        covariance = model.likelihood(model.forward(x)).covariance_matrix
    offset = y - model.mean_module(x).detach()
    solution = model.prediction_strategy.mean_cache
    return ((covariance @ solution - offset).norm() / offset.norm()).item()


@pytest.mark.parametrize(
    ("prediction_tolerance", "eval_tolerance", "bound"),
    [
        (1e-3, 0.01, 1e-3),  # the kernel's default is tighter than GPyTorch's
        (1e-3, 1e-4, 1e-4),  # a tighter GPyTorch setting wins
        (None, 1e-4, 1e-4),  # None: GPyTorch's setting alone
        (1e-4, 0.01, 1e-4),
    ],
)
def test_the_mean_solve_runs_to_the_smaller_tolerance(prediction_tolerance, eval_tolerance, bound):
    preconditioned, _ = models(num_features=16)
    preconditioned.covar_module.prediction_tolerance = prediction_tolerance
    with (
        gpytorch.settings.max_cholesky_size(100),
        gpytorch.settings.eval_cg_tolerance(eval_tolerance),
        torch.no_grad(),
    ):
        preconditioned(test_test_points())
    assert preconditioned.prediction_strategy.tolerance == prediction_tolerance
    assert mean_solve_residual(preconditioned) <= bound


def test_a_tighter_tolerance_shows_in_the_mean():
    errors = {}
    for tolerance in (None, 1e-4):
        preconditioned, plain = models(num_features=16)
        assert preconditioned.covar_module.prediction_tolerance == 1e-3  # the default
        preconditioned.covar_module.prediction_tolerance = tolerance
        x = test_test_points()
        with gpytorch.settings.max_cholesky_size(100), torch.no_grad():
            mean = preconditioned(x).mean
        errors[tolerance] = (mean - dense_prediction(plain, x)[0]).abs().max().item()
    assert errors[1e-4] < errors[None] / 10


@pytest.mark.parametrize("bad", [0, -1e-3, float("inf"), float("nan"), True, "1e-3"])
def test_a_bad_prediction_tolerance_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="prediction_tolerance must be a positive relative residual"):
        PreconditionedKernel(ScaleKernel(RBFKernel()), 16, prediction_tolerance=bad)


def test_batch_views_keep_the_prediction_tolerance():
    kernel = PreconditionedKernel(
        ScaleKernel(RBFKernel(batch_shape=torch.Size([2])), batch_shape=torch.Size([2])),
        16,
        prediction_tolerance=1e-5,
        num_dims=1,
    )
    assert kernel[0].prediction_tolerance == 1e-5
