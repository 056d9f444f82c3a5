"""Contract and GP-level tests of SignedRandomFeatureKernel and the exact indefinite kernels."""

from __future__ import annotations

import pickle
import unittest
import warnings

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from linear_operator import settings as linop_settings
from linear_operator.utils.errors import NotPSDError
from linear_operator.utils.warnings import NumericalWarning

import gprf

from gprf.exceptions import IndefiniteKernelError
from gprf.features import delta_gaussian_spectrum, spherical_polynomial_spectrum
from gprf.kernels import (
    DeltaGaussianKernel,
    FeatureKernel,
    SignedFeatureKernel,
    SignedRandomFeatureKernel,
    SphericalPolynomialKernel,
)
from gprf.linalg import SignedRootLinearOperator
from gprf.prediction import krein_ridge_mean
from tests.kernels.test_random_fourier import SEED, RandomFeatureKernelTestCase, _num_dims
from tests.prediction.conftest import ExactModel, make_data, train_by_mll

SPECTRUM = delta_gaussian_spectrum([2.0, -1.0], [1.0, 3.0])


class TestSignedKernel(RandomFeatureKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return SignedRandomFeatureKernel(32, SPECTRUM, num_dims=_num_dims(kwargs, 2), seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return SignedRandomFeatureKernel(32, SPECTRUM, num_dims=num_dims, ard_num_dims=num_dims, seed=SEED, **kwargs)


class TestOrthogonalSignedKernel(TestSignedKernel):
    def create_kernel_no_ard(self, **kwargs):
        return SignedRandomFeatureKernel(32, SPECTRUM, _num_dims(kwargs, 2), sampler="orthogonal", seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return SignedRandomFeatureKernel(
            32, SPECTRUM, num_dims, sampler="orthogonal", ard_num_dims=num_dims, seed=SEED, **kwargs
        )


def _model(x, y, kernel, noise=0.1):
    likelihood = gpytorch.likelihoods.GaussianLikelihood().to(x.dtype)
    likelihood.noise = noise
    model = ExactModel(x, y, likelihood, kernel).to(x.dtype)
    model.mean_module.constant.data.fill_(0.2)
    return model


def _signed_kernel(dtype=torch.float64, **kwargs):
    kernel = ScaleKernel(SignedRandomFeatureKernel(48, SPECTRUM, num_dims=3, ard_num_dims=3, seed=0, **kwargs)).to(dtype)
    kernel.outputscale = 1.3
    kernel.base_kernel.lengthscale = torch.tensor([0.4, 0.7, 1.1], dtype=dtype)
    return kernel


def test_evaluation_is_the_signed_root():
    x, _ = make_data(30)
    kernel = _signed_kernel().base_kernel
    a, b = kernel.signed_features(x)
    covar = kernel(x).evaluate_kernel()
    assert isinstance(covar, SignedRootLinearOperator)
    torch.testing.assert_close(covar.to_dense(), a @ a.mT - b @ b.mT)
    torch.testing.assert_close(kernel(x, x[:5]).to_dense(), a @ a[:5].mT - b @ b[:5].mT)
    torch.testing.assert_close(kernel(x, diag=True), torch.full((30,), 1.0, dtype=torch.float64))
    # A sibling of the real-root kernels, not a restriction of one: no real root to ask for.
    assert isinstance(kernel, SignedFeatureKernel) and not isinstance(kernel, FeatureKernel)
    assert not hasattr(kernel, "features") and kernel.root_dim == 2 * kernel.num_features == a.size(-1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_posterior_mean_is_krein_ridge_regression(dtype):
    """model(x).mean and krein_ridge_mean equal the dense solve mu + K*(K + s^2 I)^-1 (y - mu)."""
    x, y = make_data(60, dtype=dtype)
    kernel = _signed_kernel(dtype)
    model = _model(x, y, kernel).eval()
    test_x = torch.rand(9, 3, generator=torch.Generator().manual_seed(1), dtype=dtype)
    x64, y64, t64 = x.double(), y.double(), test_x.double()
    k64 = _signed_kernel()
    dense = k64(t64, x64).to_dense() @ torch.linalg.solve(
        k64(x64).to_dense() + 0.1 * torch.eye(60, dtype=torch.float64), y64 - 0.2
    ) + 0.2
    tolerance = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-7, atol=1e-7)
    torch.testing.assert_close(model(test_x).mean.double(), dense.detach(), **tolerance)
    torch.testing.assert_close(krein_ridge_mean(k64, x64, y64 - 0.2, t64, 0.1) + 0.2, dense, rtol=1e-9, atol=1e-9)


def test_psd_operations_raise_instead_of_nan():
    x, y = make_data(40)
    model = _model(x, y, _signed_kernel())
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    model.train()
    with pytest.raises(IndefiniteKernelError, match="log-determinant"):
        mll(model(x), y)
    # With linear_operator's fast log_prob switched off (BoTorch does so), gprf's MultivariateNormal keeps
    # indefinite operators on their own inv_quad_logdet: the same clear error. GPyTorch's class factors the dense
    # matrix instead, which fails with linear_operator's NotPSDError (never a silent NaN).
    with linop_settings.fast_computations(log_prob=False), pytest.raises(IndefiniteKernelError, match="log-determinant"):
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


def test_singular_ridge_system_raises():
    x = torch.nn.functional.normalize(torch.randn(6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64), dim=-1)
    kernel = SignedRandomFeatureKernel(4, SPECTRUM, num_dims=3, seed=0).double()
    covar = kernel(x).evaluate_kernel()
    eigenvalue = torch.linalg.eigvalsh(covar.to_dense())[0]  # negative: minus it makes K + s^2 I singular
    assert eigenvalue < 0
    with pytest.raises(IndefiniteKernelError, match="singular"):
        covar.add_diagonal(-eigenvalue.expand(6)).solve(torch.ones(6, 1, dtype=torch.float64))


def test_psd_part_trains_by_marginal_likelihood():
    x, y = make_data(60)
    signed = _signed_kernel().base_kernel
    for part, columns in (("positive", 96), ("absolute", 192)):
        psd = signed.psd_part(part)
        assert psd.features(x).shape == (60, columns)
        model = _model(x, y, ScaleKernel(psd).double())
        losses = train_by_mll(model, x, y, steps=15)
        assert losses[-1] < losses[0]
        model.eval()
        assert bool((model(x[:4]).variance > 0).all())
    torch.testing.assert_close(signed.psd_part()(x).to_dense() - signed(x).to_dense(), signed.signed_features(x)[1] @ signed.signed_features(x)[1].mT)


def test_ridge_hyperparameters_learn_by_validation_loss():
    """The GP-level use of an indefinite kernel: fit the lengthscale on a held-out ridge-regression loss."""
    x, y = make_data(80)
    train, valid = slice(0, 60), slice(60, 80)
    kernel = _signed_kernel(sampler="orthogonal")
    optimizer = torch.optim.Adam(kernel.parameters(), lr=0.05)
    losses = []
    for _ in range(15):
        optimizer.zero_grad()
        mean = krein_ridge_mean(kernel, x[train], y[train] - y[train].mean(), x[valid], 0.05) + y[train].mean()
        loss = (mean - y[valid]).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


def test_exact_targets():
    x, _ = make_data(20)
    kernel = _signed_kernel().base_kernel
    exact = kernel.exact()
    assert isinstance(exact, DeltaGaussianKernel) and exact.raw_lengthscale is kernel.raw_lengthscale
    z = x / kernel.lengthscale
    torch.testing.assert_close(exact(x[:10], x[10:], diag=True), kernel.feature_map.expected_kernel(z[:10], z[10:]))
    with pytest.raises(IndefiniteKernelError, match="Cholesky"):
        exact(x).evaluate_kernel().cholesky()
    # Ridge regression with the exact target agrees with its dense solve.
    y = torch.sin(x.sum(-1))
    dense = exact(x[:5], x).to_dense() @ torch.linalg.solve(exact(x).to_dense() + 0.1 * torch.eye(20, dtype=torch.float64), y)
    torch.testing.assert_close(krein_ridge_mean(exact, x, y, x[:5], 0.1), dense)


def test_spherical_kernel():
    x = torch.nn.functional.normalize(torch.randn(25, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64), dim=-1)
    spectrum = spherical_polynomial_spectrum(2.0, 3, 4, truncation=40.0)
    kernel = SignedRandomFeatureKernel(64, spectrum, num_dims=4, sampler="orthogonal", seed=0).double()
    torch.testing.assert_close(kernel.lengthscale, torch.ones(1, 1, dtype=torch.float64))
    assert not kernel.raw_lengthscale.requires_grad
    exact = kernel.exact()
    assert isinstance(exact, SphericalPolynomialKernel)
    torch.testing.assert_close(exact(x).to_dense(), ((1 + x @ x.mT) / 2) ** 3)
    with pytest.raises(ValueError, match="unit sphere"):
        exact(2 * x).to_dense()
    with pytest.raises(ValueError, match="unit sphere"):
        kernel(2 * x).to_dense()


def test_state_dict_pickle_device_and_sums(device):
    x, _ = make_data(20)
    x = x.to(device)
    kernel = _signed_kernel().to(device)
    fresh = ScaleKernel(SignedRandomFeatureKernel(48, SPECTRUM, num_dims=3, ard_num_dims=3, seed=5)).double().to(device)
    fresh.load_state_dict(kernel.state_dict())
    torch.testing.assert_close(fresh(x).to_dense(), kernel(x).to_dense())
    clone = pickle.loads(pickle.dumps(kernel))
    torch.testing.assert_close(clone(x).to_dense(), kernel(x).to_dense())
    assert kernel(x).to_dense().device.type == device.type
    with pytest.raises(TypeError, match="one spectrum"):
        kernel.base_kernel + kernel.base_kernel
