"""CompositionalRandomFeatureKernel: contract, tied exact kernel, construction errors, GP training."""

from __future__ import annotations

import unittest

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from linear_operator.operators import LowRankRootLinearOperator

from gprf.features import Skeleton
from gprf.kernels import CompositionalKernel, CompositionalRandomFeatureKernel
from gprf.testing import SEED, ExactGPModel, FeatureKernelTestCase, num_dims_of, regression_data
from tests.helpers.regression import train_and_predict

pytestmark = pytest.mark.usefixtures("single_thread")


def _skeleton(num_dims: int) -> Skeleton:
    return Skeleton.fully_connected(num_dims, 2, "exponential")


class TestCompositionalRandomFeatureKernel(FeatureKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return CompositionalRandomFeatureKernel(_skeleton(num_dims_of(kwargs, 2)), 32, seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return CompositionalRandomFeatureKernel(_skeleton(num_dims), 32, seed=SEED, ard_num_dims=num_dims, **kwargs)


@pytest.fixture
def x64():
    return torch.rand(40, 9, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def test_structure_exact_tie_and_accuracy(x64):
    skeleton = Skeleton.convolutional((3, 3), patch_size=2, num_layers=1, activation="relu")
    kernel = CompositionalRandomFeatureKernel(skeleton, 2048, ard_num_dims=9, seed=0).double()
    kernel.lengthscale = torch.linspace(0.3, 2.0, 9, dtype=torch.float64)
    assert isinstance(kernel(x64).evaluate_kernel(), LowRankRootLinearOperator)
    exact = kernel.exact()
    assert isinstance(exact, CompositionalKernel) and exact.raw_lengthscale is kernel.raw_lengthscale
    z = x64 / kernel.lengthscale
    torch.testing.assert_close(exact(x64).to_dense(), skeleton.kernel(z, z))
    approx, target = kernel(x64).to_dense(), exact(x64).to_dense()
    error = torch.linalg.matrix_norm(approx - target) / torch.linalg.matrix_norm(target)
    assert error.item() < 0.1, error
    # Gradients reach the ARD lengthscale through both kernels.
    (approx.sum() + target.sum()).backward()
    assert torch.isfinite(kernel.raw_lengthscale.grad).all() and bool((kernel.raw_lengthscale.grad != 0).all())


def test_state_dict_into_fresh_kernel(x64):
    skeleton = Skeleton.fully_connected(9, 2, "relu")
    kernel = CompositionalRandomFeatureKernel(skeleton, 64, seed=1).double()
    kernel.lengthscale = 0.7
    fresh = CompositionalRandomFeatureKernel(skeleton, 64, seed=2).double()
    fresh.load_state_dict(kernel.state_dict())
    torch.testing.assert_close(fresh(x64).to_dense(), kernel(x64).to_dense())


def test_device(device, x64):
    kernel = CompositionalRandomFeatureKernel(Skeleton.fully_connected(9, 1, "relu"), 32, seed=0).double()
    expected = kernel(x64).to_dense()
    torch.testing.assert_close(kernel.to(device)(x64.to(device)).to_dense().cpu(), expected)


def test_bad_input():
    skeleton = Skeleton.fully_connected(4, 1, "relu")
    with pytest.raises(ValueError, match="ard_num_dims=3 does not match num_dims=4"):
        CompositionalRandomFeatureKernel(skeleton, 16, ard_num_dims=3)
    with pytest.raises(ValueError, match="active_dims selects 2 columns but the skeleton reads 4"):
        CompositionalRandomFeatureKernel(skeleton, 16, active_dims=[0, 1])
    with pytest.raises(TypeError, match="Skeleton"):
        CompositionalRandomFeatureKernel(4, 16)


def test_gp_training_and_prediction():
    x, y = regression_data(n=80, d=3, seed=0)
    test_x, test_y = regression_data(n=40, d=3, seed=1)
    skeleton = Skeleton.convolutional(3, patch_size=2, num_layers=1, activation="exponential", base_kernel="gaussian")
    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    model = ExactGPModel(
        x, y, likelihood, ScaleKernel(CompositionalRandomFeatureKernel(skeleton, 256, seed=0))
    ).double()
    losses, prediction, nmse = train_and_predict(model, x, y, test_x, test_y)
    assert losses[-1] < losses[0] - 0.3
    assert nmse.item() < 0.2, nmse
    assert bool((prediction.variance > 0).all())
