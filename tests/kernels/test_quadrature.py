"""QuadratureKernel (SR(3,3) features of the RBF kernel): GPyTorch's BaseKernelTestCase for both rotations, the tied
RBF target, construction errors, state_dict, and GP training and BoTorch posteriors with it."""

from __future__ import annotations

import unittest

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from linear_operator.operators import LowRankRootLinearOperator

from gprf.kernels import QuadratureKernel
from gprf.testing import SEED, ExactGPModel, FeatureKernelTestCase, num_dims_of, regression_data
from tests.helpers.regression import train_and_predict, weight_space_prediction

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.mark.filterwarnings("ignore:QuadratureFeatures.*infinite variance:UserWarning")
class TestQuadratureKernelRBF(FeatureKernelTestCase, unittest.TestCase):
    rotation = "haar"

    def create_kernel_no_ard(self, **kwargs):
        return QuadratureKernel(2, num_dims_of(kwargs, 2), rotation=self.rotation, seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return QuadratureKernel(2, num_dims, rotation=self.rotation, ard_num_dims=num_dims, seed=SEED, **kwargs)


class TestQuadratureKernelButterfly(TestQuadratureKernelRBF):
    rotation = "butterfly"


@pytest.fixture
def x64():
    return torch.randn(30, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


@pytest.mark.parametrize("kernel", ["rbf"])
def test_structure_and_exact(kernel, x64):
    k = QuadratureKernel(64, num_dims=4, seed=0).double()
    assert k.num_features == 2 * 64 * 5
    assert isinstance(k(x64).evaluate_kernel(), LowRankRootLinearOperator)
    exact = k.exact()
    assert isinstance(exact, RBFKernel) and exact.raw_lengthscale is k.raw_lengthscale
    k.lengthscale = 1.7
    torch.testing.assert_close(exact.lengthscale, k.lengthscale)
    approx, target = k(x64).to_dense(), exact(x64).to_dense()
    assert (torch.linalg.norm(approx - target) / torch.linalg.norm(target)).item() < 0.15


def test_bad_input():
    with pytest.raises(ValueError, match="num_rules"):
        QuadratureKernel(0, num_dims=3)
    with pytest.raises(TypeError, match="ArcCosineQuadratureKernel"):
        QuadratureKernel(1, num_dims=3, kernel="arccos1")
    with pytest.raises(ValueError, match="'haar', 'butterfly'"):
        QuadratureKernel(1, num_dims=3, rotation="householder")
    with pytest.raises(ValueError, match="num_dims"):
        QuadratureKernel(1)


def test_state_dict_into_fresh_kernel(x64):
    kernel = QuadratureKernel(3, num_dims=4, rotation="butterfly", ard_num_dims=4, seed=1).double()
    kernel.lengthscale = torch.tensor([[0.5, 1.0, 1.5, 2.0]], dtype=torch.float64)
    fresh = QuadratureKernel(3, num_dims=4, rotation="butterfly", ard_num_dims=4, seed=2).double()
    fresh.load_state_dict(kernel.state_dict())
    torch.testing.assert_close(fresh(x64).to_dense(), kernel(x64).to_dense())


@pytest.mark.parametrize("kernel", ["rbf"])
def test_exact_gp_training_loop(kernel):
    x, y = regression_data(n=80, d=3, seed=0)
    test_x, test_y = regression_data(n=40, d=3, seed=1)
    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    covar = ScaleKernel(QuadratureKernel(8, num_dims=3, rotation="butterfly", seed=0))
    model = ExactGPModel(x, y, likelihood, covar).double()
    losses, prediction, nmse = train_and_predict(model, x, y, test_x, test_y)
    assert losses[-1] < losses[0] - 0.3
    assert nmse.item() < 0.2, nmse
    assert bool((prediction.variance > 0).all())


def test_botorch_posterior():
    """SingleTaskGP with the kernel: its posterior is the weight-space posterior of the finite model."""
    from botorch.models import SingleTaskGP

    x, y = regression_data(n=30, d=3, seed=2)
    model = SingleTaskGP(x, y.unsqueeze(-1), covar_module=ScaleKernel(QuadratureKernel(4, num_dims=3, seed=0)))
    test_x = torch.rand(5, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    posterior = model.posterior(test_x)
    # BoTorch standardizes the targets: compare in the model's (transformed) space, then untransform.
    train_y = model.train_targets
    noise = model.likelihood.noise.detach().expand(30)
    with torch.no_grad():
        mean, covariance = weight_space_prediction(model, x, train_y, test_x, noise)
        mean, variance = model.outcome_transform.untransform(mean.unsqueeze(-1), covariance.diagonal().unsqueeze(-1))
    torch.testing.assert_close(posterior.mean.detach(), mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(posterior.variance.detach(), variance, rtol=0, atol=1e-8)
