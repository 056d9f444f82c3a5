"""ArcCosineQuadratureKernel (SR(3,3) features of the arc-cosine kernels): GPyTorch's BaseKernelTestCase, the
exact ArcCosineKernel target, no lengthscale (scale-free targets), construction errors, GP training and BoTorch."""

from __future__ import annotations

import unittest

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from linear_operator.operators import LowRankRootLinearOperator

from gprf.kernels import ArcCosineKernel, ArcCosineQuadratureKernel, QuadratureKernel
from gprf.testing import SEED, ExactGPModel, FeatureKernelTestCase, num_dims_of, regression_data
from tests.helpers.regression import train_and_predict, weight_space_prediction

pytestmark = pytest.mark.usefixtures("single_thread")


class TestQuadratureKernelArcCosine(FeatureKernelTestCase, unittest.TestCase):
    """Scale-free kernels: no ARD lengthscale, so the ARD variants build the kernel without one."""

    def create_kernel_no_ard(self, **kwargs):
        return ArcCosineQuadratureKernel(2, num_dims_of(kwargs, 2), order=1, rotation="butterfly", seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return ArcCosineQuadratureKernel(2, num_dims, order=1, rotation="butterfly", seed=SEED, **kwargs)


@pytest.fixture
def x64():
    return torch.randn(30, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


@pytest.mark.parametrize("kernel", ["arccos0", "arccos1"])
def test_structure_and_exact(kernel, x64):
    order = int(kernel[-1])
    k = ArcCosineQuadratureKernel(64, num_dims=4, order=order, seed=0).double()
    assert k.num_features == 2 * 64 * 5
    assert isinstance(k(x64).evaluate_kernel(), LowRankRootLinearOperator)
    exact = k.exact()
    assert isinstance(exact, ArcCosineKernel) and exact.order == order
    assert k.lengthscale is None and not k.has_lengthscale
    approx, target = k(x64).to_dense(), exact(x64).to_dense()
    assert (torch.linalg.norm(approx - target) / torch.linalg.norm(target)).item() < 0.15


def test_scale_free_lengthscale_errors():
    for name in ("ard_num_dims", "lengthscale_prior", "lengthscale_constraint"):
        value = {
            "ard_num_dims": 3,
            "lengthscale_prior": gpytorch.priors.GammaPrior(2.0, 1.0),
            "lengthscale_constraint": gpytorch.constraints.Positive(),
        }[name]
        with pytest.raises(ValueError, match="scale-free"):
            ArcCosineQuadratureKernel(1, num_dims=3, order=1, **{name: value})
    kernel = ArcCosineQuadratureKernel(1, num_dims=3, order=0)
    with pytest.raises(ValueError, match="scale-free"):
        kernel.lengthscale = 2.0
    # A class attribute, as GPyTorch's kernels have it: no per-instance switch.
    assert not ArcCosineQuadratureKernel.has_lengthscale and "has_lengthscale" not in vars(kernel)
    assert QuadratureKernel.has_lengthscale and QuadratureKernel(1, num_dims=3).lengthscale.shape == (1, 1)


def test_bad_input():
    with pytest.raises(ValueError, match="order must be 0 or 1"):
        ArcCosineQuadratureKernel(1, num_dims=3, order=2)
    with pytest.raises(ValueError, match="'haar', 'butterfly'"):
        ArcCosineQuadratureKernel(1, num_dims=3, rotation="householder")
    with pytest.raises(ValueError, match="num_dims"):
        ArcCosineQuadratureKernel(1)


@pytest.mark.parametrize("kernel", ["arccos1"])
def test_exact_gp_training_loop(kernel):
    x, y = regression_data(n=80, d=3, seed=0)
    test_x, test_y = regression_data(n=40, d=3, seed=1)
    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    covar = ScaleKernel(ArcCosineQuadratureKernel(8, num_dims=3, order=1, rotation="butterfly", seed=0))
    model = ExactGPModel(x, y, likelihood, covar).double()
    losses, prediction, nmse = train_and_predict(model, x, y, test_x, test_y)
    assert losses[-1] < losses[0] - 0.3
    # The (non-stationary, bias-free) arc-cosine-1 kernel only has to beat the constant predictor.
    assert nmse.item() < 0.8, nmse
    assert bool((prediction.variance > 0).all())


def test_botorch_posterior():
    """SingleTaskGP with the kernel: its posterior is the weight-space posterior of the finite model."""
    from botorch.models import SingleTaskGP

    x, y = regression_data(n=30, d=3, seed=2)
    kernel = ScaleKernel(ArcCosineQuadratureKernel(4, num_dims=3, order=1, seed=0))
    model = SingleTaskGP(x, y.unsqueeze(-1), covar_module=kernel)
    test_x = torch.rand(5, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    posterior = model.posterior(test_x)
    noise = model.likelihood.noise.detach().expand(30)
    with torch.no_grad():
        mean, covariance = weight_space_prediction(model, x, model.train_targets, test_x, noise)
        mean, variance = model.outcome_transform.untransform(mean.unsqueeze(-1), covariance.diagonal().unsqueeze(-1))
    torch.testing.assert_close(posterior.mean.detach(), mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(posterior.variance.detach(), variance, rtol=0, atol=1e-8)
