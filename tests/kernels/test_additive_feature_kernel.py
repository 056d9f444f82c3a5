"""AdditiveFeatureKernel: GPyTorch's BaseKernelTestCase, the tied exact kernel, Monte-Carlo mean and variance against
the closed forms, a GP over 20 input dimensions trained by the marginal likelihood against the exact additive GP,
BoTorch pathwise samples against the model's own posterior, and construction errors."""

from __future__ import annotations

import unittest

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from gprf.kernels import AdditiveFeatureKernel, ExactAdditiveKernel, exact_expression
from gprf.testing import DEVICES, SEED, ExactGPModel, FeatureKernelTestCase, diagonal_draws, num_dims_of, train_by_mll
from tests.helpers.gaussian_samples import assert_paths_follow_the_posterior

Z_BOUND = 4.5  # two-sided, over a few dozen z-scores per test


class TestAdditiveFeatureKernel(FeatureKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return AdditiveFeatureKernel(16, num_dims_of(kwargs, 2), seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return AdditiveFeatureKernel(16, num_dims, ard_num_dims=num_dims, seed=SEED, **kwargs)


class TestSecondOrderAdditiveFeatureKernel(TestAdditiveFeatureKernel):
    def create_kernel_no_ard(self, **kwargs):
        return AdditiveFeatureKernel(8, num_dims_of(kwargs, 2), kernel="matern52", order=2, seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return AdditiveFeatureKernel(
            8, num_dims, kernel="matern52", order=2, ard_num_dims=num_dims, seed=SEED, **kwargs
        )


def _x(n: int = 8, d: int = 4, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("order", [1, 2])
def test_the_exact_kernel_is_the_additive_target_tied_to_this_kernel(order):
    gprf_kernel = AdditiveFeatureKernel(4, num_dims=3, kernel="matern52", order=order, ard_num_dims=3, seed=0).double()
    exact = gprf_kernel.exact()
    assert isinstance(exact, ExactAdditiveKernel) and (exact.kernel, exact.order) == ("matern52", order)
    assert exact.raw_lengthscale is gprf_kernel.raw_lengthscale
    x = _x(d=3)
    torch.testing.assert_close(gprf_kernel.expected_kernel(x, x.flip(0)), exact(x, x.flip(0), diag=True))


def test_second_order_exact_kernel_sums_pairwise_products_and_ties_tau():
    gprf_kernel = AdditiveFeatureKernel(4, num_dims=3, order=2, seed=0).double()
    gprf_kernel.interaction_variance = 0.3
    exact = gprf_kernel.exact()
    assert exact.raw_interaction_variance is gprf_kernel.raw_interaction_variance
    x, y = _x(d=3), _x(5, d=3, seed=1)
    per_dim = [RBFKernel().double()(x[:, [j]], y[:, [j]]).to_dense() for j in range(3)]
    pairs = per_dim[0] * per_dim[1] + per_dim[0] * per_dim[2] + per_dim[1] * per_dim[2]
    torch.testing.assert_close(exact(x, y).to_dense(), sum(per_dim) + 0.3 * pairs)
    torch.testing.assert_close(gprf_kernel.expected_kernel(x[:5], y), exact(x[:5], y, diag=True))


@pytest.mark.parametrize("order", [1, 2])
def test_monte_carlo_mean_and_variance_of_the_kernel(order):
    num_draws = 300
    pair_features = {"features_per_pair": 4} if order == 2 else {}
    kernel = AdditiveFeatureKernel(6, num_dims=3, order=order, ard_num_dims=3, seed=0, **pair_features).double()
    kernel.lengthscale = torch.tensor([[0.6, 1.0, 1.7]], dtype=torch.float64)
    if order == 2:
        kernel.interaction_variance = 0.5
    x, y = _x(d=3), _x(d=3, seed=1)
    values = diagonal_draws(kernel, x, y, num_draws)
    variance = kernel.variance(x, y).detach()
    z = (values.mean(0) - kernel.exact()(x, y, diag=True).detach()) / (variance / num_draws).sqrt()
    assert z.abs().max() < Z_BOUND


def _additive_data(n: int, d: int = 20, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=generator, dtype=torch.float64)
    # An additive function: each input dimension contributes one smooth bump.
    y = torch.sin(4 * x).sum(-1) + 0.1 * torch.randn(n, generator=generator, dtype=torch.float64)
    return x, y


def test_gp_over_20_dimensions_trains_and_predicts_like_the_exact_additive_gp():
    x, y = _additive_data(160)
    test_x, test_y = _additive_data(60, seed=1)
    kernel = ScaleKernel(AdditiveFeatureKernel(64, num_dims=20, seed=0)).double()
    model = ExactGPModel(x, y, gpytorch.likelihoods.GaussianLikelihood().double(), kernel).double()
    losses = train_by_mll(model, x, y, steps=40)
    assert losses[-1] < losses[0]
    # The exact additive GP with the very same (trained, shared) hyperparameters.
    exact = ExactGPModel(x, y, model.likelihood, exact_expression(kernel)).double()
    exact.mean_module = model.mean_module
    model.eval(), exact.eval()
    with torch.no_grad():
        approximate, reference = model.likelihood(model(test_x)), exact.likelihood(exact(test_x))
    nmse = ((approximate.mean - test_y) ** 2).mean() / test_y.var()
    reference_nmse = ((reference.mean - test_y) ** 2).mean() / test_y.var()
    assert nmse < 0.05 and nmse < reference_nmse + 0.01
    # The predictive means differ by much less than the predictive standard deviation.
    assert ((approximate.mean - reference.mean).abs() / reference.stddev).mean() < 0.25


@pytest.mark.botorch
def test_pathwise_samples_follow_the_models_posterior():
    from gprf.botorch import RandomFeatureSingleTaskGP

    num_paths = 3000
    x, y = _additive_data(40, d=6)
    kernel = ScaleKernel(AdditiveFeatureKernel(16, num_dims=6, order=2, features_per_pair=4, seed=0)).double()
    model = RandomFeatureSingleTaskGP(x, y.unsqueeze(-1), covar_module=kernel).eval()
    test_x = torch.rand(6, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    assert_paths_follow_the_posterior(model, test_x, num_paths, Z_BOUND)


@pytest.mark.parametrize("device", DEVICES)
def test_device_and_float32(device):
    kernel = AdditiveFeatureKernel(8, num_dims=3, order=2, seed=0).to(device)
    x = _x(d=3).float().to(device)
    covariance = kernel(x).to_dense()
    assert covariance.dtype == torch.float32 and covariance.device.type == torch.device(device).type
    reference = kernel.double()(x.double()).to_dense()
    torch.testing.assert_close(covariance.double(), reference, rtol=0, atol=1e-5 * float(reference.abs().max()))


def test_bad_input_errors():
    with pytest.raises(ValueError, match="num_dims=d"):
        AdditiveFeatureKernel(8)
    with pytest.raises(ValueError, match="ard_num_dims=3 does not match num_dims=4"):
        AdditiveFeatureKernel(8, num_dims=4, ard_num_dims=3)
    with pytest.raises(ValueError, match="num_dims=3"):
        AdditiveFeatureKernel(8, num_dims=2)(_x(d=3)).to_dense()
    with pytest.raises(ValueError, match="features_per_pair=4 sizes the pairwise interactions.*pass order=2"):
        AdditiveFeatureKernel(8, num_dims=3, features_per_pair=4)
