"""LocalizedMaclaurinKernel: GPyTorch kernel contract, re-centrable roots, exactness at the centre, bad input."""

from __future__ import annotations

import pickle
import unittest

import pytest
import torch
from gpytorch.distributions import MultivariateNormal
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import GaussianLikelihood

from gprf.features import MaclaurinFeatures
from gprf.kernels import LocalizedMaclaurinKernel, MaclaurinKernel
from gprf.linalg import FeatureRootLinearOperator, feature_root
from gprf.prediction import LocalizedPredictionStrategy
from gprf.testing import SEED, FeatureKernelTestCase, num_dims_of

pytestmark = pytest.mark.usefixtures("single_thread")

ALLOCATION = [31, 20, 12]


class TestLocalizedMaclaurinKernel(FeatureKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return LocalizedMaclaurinKernel(
            64, num_dims_of(kwargs, 2), sketch="srht", allocation=ALLOCATION, seed=SEED, **kwargs
        )

    def create_kernel_ard(self, num_dims, **kwargs):
        return LocalizedMaclaurinKernel(
            64, num_dims, sketch="srht", allocation=ALLOCATION, ard_num_dims=num_dims, seed=SEED, **kwargs
        )


def _x(n=30, d=3, seed=0):
    return torch.rand(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_training_covariance_is_the_global_maclaurin_kernel(float64):
    x = _x()
    local = LocalizedMaclaurinKernel(64, 3, ard_num_dims=3, train_inputs=x, seed=0)
    plain = MaclaurinKernel(64, 3, kernel="gaussian", ard_num_dims=3, train_inputs=x, seed=0)
    assert local.feature_map.counts == plain.feature_map.counts
    torch.testing.assert_close(local(x).to_dense(), plain(x).to_dense(), rtol=0, atol=0)
    torch.testing.assert_close(local(x, x[:5]).to_dense(), plain(x, x[:5]).to_dense(), rtol=0, atol=0)
    torch.testing.assert_close(local(x, diag=True), plain(x, diag=True), rtol=0, atol=0)


def test_symmetric_covariances_carry_scaled_inputs_through_scale_kernel(float64):
    x = _x()
    kernel = ScaleKernel(LocalizedMaclaurinKernel(64, 3, allocation=ALLOCATION, ard_num_dims=3, seed=0))
    kernel.base_kernel.lengthscale = torch.tensor([0.5, 1.0, 2.0])
    kernel.outputscale = 2.5
    covar = kernel(x).evaluate_kernel()
    assert isinstance(covar, FeatureRootLinearOperator)
    root = feature_root(covar)
    torch.testing.assert_close(root.inputs, x / kernel.base_kernel.lengthscale)
    torch.testing.assert_close(root.outputscale, kernel.outputscale.detach())
    # The covariance itself is unchanged: outputscale times the Maclaurin kernel.
    torch.testing.assert_close(covar.to_dense(), 2.5 * kernel.base_kernel(x).to_dense())


def test_the_strategy_gets_the_maps_re_centring_from_the_kernel(float64):
    x = _x()
    kernel = ScaleKernel(LocalizedMaclaurinKernel(64, 3, allocation=ALLOCATION, seed=0))
    prior = MultivariateNormal(torch.zeros(30), kernel(x))
    strategy = kernel.prediction_strategy(x, prior, torch.zeros(30), GaussianLikelihood())
    assert isinstance(strategy, LocalizedPredictionStrategy)
    center = x[:1] / kernel.base_kernel.lengthscale
    torch.testing.assert_close(
        strategy.recentred_features(x, center), kernel.base_kernel.feature_map.real_features_about(x, center)
    )


def test_features_about_a_centre_are_the_map_centred_there(float64):
    x = _x(d=2)
    kernel = LocalizedMaclaurinKernel(64, 2, train_inputs=x, seed=0)
    assert kernel.feature_map.center.abs().min() > 0.1  # the map's own centre is added back
    center = torch.tensor([0.3, -0.7])
    reference = MaclaurinFeatures(2, 64, kernel="gaussian", allocation=kernel.feature_map.counts, seed=0)
    reference.center = center
    z = x / kernel.lengthscale
    torch.testing.assert_close(kernel.feature_map.real_features_about(z, center), reference(z))


@pytest.mark.parametrize("sketch", ["rademacher", "gaussian", "srht"])
def test_kernel_is_exact_at_its_centre(sketch, float64):
    """k_hat(u, 0) = exp(-|u|^2 / 2) for every draw: the sketches vanish at 0, the constant feature is 1."""
    kernel = LocalizedMaclaurinKernel(48, 3, sketch=sketch, allocation=[20, 17, 10], seed=1)
    offsets = 2.0 * torch.randn(25, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    at_centre = kernel.feature_map.real_features_about(torch.zeros(1, 3), torch.zeros(3))
    torch.testing.assert_close(at_centre.square().sum(), torch.tensor(1.0))
    k_hat = (kernel.feature_map.real_features_about(offsets, torch.zeros(3)) @ at_centre.mT).squeeze(-1)
    torch.testing.assert_close(k_hat, torch.exp(-0.5 * offsets.square().sum(-1)), rtol=1e-12, atol=0)


def test_given_centres_follow_state_dict_and_pickling(float64):
    centers = _x(4, 2, seed=5)
    kernel = LocalizedMaclaurinKernel(32, 2, centers=centers, allocation=[20, 11], seed=0)
    fresh = LocalizedMaclaurinKernel(32, 2, centers=torch.zeros(4, 2), allocation=[20, 11], seed=1)
    fresh.load_state_dict(kernel.state_dict())
    torch.testing.assert_close(fresh.centers, centers)
    clone = pickle.loads(pickle.dumps(kernel))
    assert clone.center_mode == "given" and torch.equal(clone.centers, centers)
    assert kernel.to(torch.float32).centers.dtype == torch.float32


def test_bad_input():
    with pytest.raises(ValueError, match="shift invariance"):
        LocalizedMaclaurinKernel(32, 2, kernel="exponential")
    with pytest.raises(ValueError, match="shift invariance"):
        LocalizedMaclaurinKernel(32, 2, kernel="polynomial")
    for threshold in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="threshold must be a positive number of lengthscales"):
            LocalizedMaclaurinKernel(32, 2, centers="cluster", threshold=threshold)
    with pytest.raises(ValueError, match="threshold only applies"):
        LocalizedMaclaurinKernel(32, 2, centers="test", threshold=1.0)
    with pytest.raises(ValueError, match="centers must be 'test', 'cluster'"):
        LocalizedMaclaurinKernel(32, 2, centers="kmeans")
    with pytest.raises(ValueError, match=r"shape \(K, 2\)"):
        LocalizedMaclaurinKernel(32, 2, centers=torch.zeros(3, 5))
    with pytest.raises(ValueError, match=r"shape \(K, 2\)"):
        LocalizedMaclaurinKernel(32, 2, centers=torch.zeros(0, 2))
    with pytest.raises(ValueError, match="finite"):
        LocalizedMaclaurinKernel(32, 2, centers=torch.tensor([[0.0, float("nan")]]))
    with pytest.raises(ValueError, match="max_centers"):
        LocalizedMaclaurinKernel(32, 2, centers="cluster", max_centers=0)
    with pytest.raises(ValueError, match="chunk_size"):
        LocalizedMaclaurinKernel(32, 2, chunk_size=0)
    with pytest.raises(ValueError, match="real-part kernel"):
        LocalizedMaclaurinKernel(32, 2, complex=True, posterior="complex")
