"""gprf.prediction.signed: the posterior mean of an indefinite-kernel model (Krein-space kernel ridge regression),
krein_ridge_mean, and the PSD operations such a model refuses instead of returning NaN."""

from __future__ import annotations

import warnings

import gpytorch
import pytest
import torch
from linear_operator import settings as linop_settings
from linear_operator.utils.errors import NotPSDError
from linear_operator.utils.warnings import NumericalWarning

import gprf
from gprf.exceptions import IndefiniteKernelError
from gprf.prediction import krein_ridge_mean
from gprf.testing import regression_data
from tests.helpers.regression import signed_kernel, signed_model


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_posterior_mean_is_krein_ridge_regression(dtype):
    """model(x).mean and krein_ridge_mean equal the dense solve mu + K*(K + s^2 I)^-1 (y - mu)."""
    x, y = regression_data(60, dtype=dtype)
    kernel = signed_kernel(dtype)
    model = signed_model(x, y, kernel).eval()
    test_x = torch.rand(9, 3, generator=torch.Generator().manual_seed(1), dtype=dtype)
    x64, y64, t64 = x.double(), y.double(), test_x.double()
    k64 = signed_kernel()
    dense = (
        k64(t64, x64).to_dense()
        @ torch.linalg.solve(k64(x64).to_dense() + 0.1 * torch.eye(60, dtype=torch.float64), y64 - 0.2)
        + 0.2
    )
    tolerance = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-7, atol=1e-7)
    torch.testing.assert_close(model(test_x).mean.double(), dense.detach(), **tolerance)
    torch.testing.assert_close(krein_ridge_mean(k64, x64, y64 - 0.2, t64, 0.1) + 0.2, dense, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("change", ["resample_features", "lengthscale"])
def test_the_mean_follows_new_draws_and_hyperparameters(change):
    """After resample_features() (or a lengthscale set) on an evaluated model, the mean is that of a model freshly
    put in eval mode, not the cache of the old draws."""
    x, y = regression_data(60)
    kernel = signed_kernel()
    model = signed_model(x, y, kernel).eval()
    test_x = torch.rand(9, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    before = model(test_x).mean
    if change == "resample_features":
        kernel.base_kernel.resample_features(torch.Generator().manual_seed(5))
    else:
        kernel.base_kernel.lengthscale = torch.tensor([0.9, 0.5, 0.6], dtype=torch.float64)
    after = model(test_x).mean
    model.train()
    model.eval()
    torch.testing.assert_close(after, model(test_x).mean, rtol=0, atol=1e-10)
    assert (after - before).abs().max() > 1e-2


def test_psd_operations_raise_instead_of_nan():
    x, y = regression_data(40)
    model = signed_model(x, y, signed_kernel())
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    model.train()
    with pytest.raises(IndefiniteKernelError, match="log-determinant"):
        mll(model(x), y)
    # With linear_operator's fast log_prob switched off (BoTorch does so), gprf's MultivariateNormal keeps
    # indefinite operators on their own inv_quad_logdet: the same clear error. GPyTorch's class factors the dense
    # matrix instead, which fails with linear_operator's NotPSDError (never a silent NaN).
    with (
        linop_settings.fast_computations(log_prob=False),
        pytest.raises(IndefiniteKernelError, match="log-determinant"),
    ):
        prior = model(x)
        mll(gprf.distributions.MultivariateNormal(prior.mean, prior.lazy_covariance_matrix), y)
    with linop_settings.fast_computations(log_prob=False), pytest.raises(NotPSDError):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NumericalWarning)
            mll(model(x), y)
    with pytest.raises(IndefiniteKernelError, match="root decomposition"):
        model.covar_module(x).evaluate_kernel().root_decomposition()
    with pytest.raises(IndefiniteKernelError, match="alone"):
        model.covar_module(x).evaluate_kernel().solve(y.unsqueeze(-1))
    model.eval()
    posterior = model(x[:5] + 0.05)
    assert torch.isfinite(posterior.mean).all()
    for use in (lambda: posterior.variance, lambda: posterior.sample(), lambda: model.likelihood(posterior).variance):
        with pytest.raises(IndefiniteKernelError, match="posterior|Sampling"):
            use()
    with gpytorch.settings.skip_posterior_variances():
        torch.testing.assert_close(model(x[:5] + 0.05).mean, posterior.mean)
    with pytest.raises(IndefiniteKernelError, match="fantasy"):
        model.get_fantasy_model(x[:2], y[:2])


def test_ridge_hyperparameters_learn_by_validation_loss():
    """The GP-level use of an indefinite kernel: fit the lengthscale on a held-out ridge-regression loss."""
    x, y = regression_data(80)
    train, valid = slice(0, 60), slice(60, 80)
    kernel = signed_kernel(sampler="orthogonal")
    optimizer = torch.optim.Adam(kernel.parameters(), lr=0.05)
    losses = []
    for _ in range(25):
        optimizer.zero_grad()
        mean = krein_ridge_mean(kernel, x[train], y[train] - y[train].mean(), x[valid], 0.05) + y[train].mean()
        loss = (mean - y[valid]).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


def test_krein_ridge_mean_needs_a_positive_noise():
    x, y = regression_data(10)
    for noise in (0.0, -0.1, torch.tensor([0.1] * 9 + [0.0], dtype=torch.float64)):
        with pytest.raises(ValueError, match="noise must be positive"):
            krein_ridge_mean(signed_kernel(), x, y, x[:2], noise)
