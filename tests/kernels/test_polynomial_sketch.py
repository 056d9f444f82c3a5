"""PolynomialSketchKernel: GPyTorch's BaseKernelTestCase for dense, complex SRHT and TensorSketch sketches, the
kernel as the sketch of scaled inputs with the tied exact target, GP training, and construction errors."""

from __future__ import annotations

import unittest

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from linear_operator.operators import LowRankRootLinearOperator

from gprf.kernels import PolynomialSketchKernel
from gprf.prediction import FeatureSpacePredictionStrategy
from gprf.testing import SEED, ExactGPModel, FeatureKernelTestCase, num_dims_of, train_by_mll


class TestGaussianSketchKernel(FeatureKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return PolynomialSketchKernel(64, num_dims_of(kwargs, 2), degree=2, bias=1.0, seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return PolynomialSketchKernel(64, num_dims, degree=2, bias=1.0, ard_num_dims=num_dims, seed=SEED, **kwargs)


class TestComplexSRHTKernel(FeatureKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return PolynomialSketchKernel(
            32, num_dims_of(kwargs, 2), degree=3, sketch="srht", complex=True, seed=SEED, **kwargs
        )

    def create_kernel_ard(self, num_dims, **kwargs):
        return PolynomialSketchKernel(
            32, num_dims, degree=3, sketch="srht", complex=True, ard_num_dims=num_dims, seed=SEED, **kwargs
        )


class TestTensorSketchKernel(FeatureKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return PolynomialSketchKernel(64, num_dims_of(kwargs, 2), degree=2, sketch="tensorsketch", seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return PolynomialSketchKernel(
            64, num_dims, degree=2, sketch="tensorsketch", ard_num_dims=num_dims, seed=SEED, **kwargs
        )


def _x(n=12, d=3, seed=0):
    return torch.rand(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize(
    ("sketch", "is_complex"), [("gaussian", False), ("rademacher", True), ("srht", False), ("srht", True)]
)
def test_kernel_is_the_sketch_of_scaled_inputs_and_exact_is_tied(sketch, is_complex):
    kernel = PolynomialSketchKernel(
        16, num_dims=3, degree=2, sketch=sketch, complex=is_complex, bias=1.0, ard_num_dims=3, seed=0
    ).double()
    kernel.lengthscale = torch.tensor([0.7, 1.5, 2.5], dtype=torch.float64)
    x = _x()
    phi = kernel.feature_map(x / kernel.lengthscale)
    covar = kernel(x).evaluate_kernel()
    assert isinstance(covar, LowRankRootLinearOperator)
    assert covar.root.shape[-1] == (32 if is_complex else 16) == kernel.root_dim and kernel.num_features == 16
    torch.testing.assert_close(covar.to_dense(), (phi @ phi.conj().mT).real)
    exact = kernel.exact()
    assert exact.raw_lengthscale is kernel.raw_lengthscale and exact.degree == 2 and exact.bias == 1.0
    torch.testing.assert_close(
        exact(x, diag=True), kernel.feature_map.expected_kernel(x / kernel.lengthscale, x / kernel.lengthscale)
    )


@pytest.mark.parametrize("is_complex", [False, True])
@pytest.mark.usefixtures("single_thread")
def test_gp_training_and_prediction(is_complex):
    generator = torch.Generator().manual_seed(3)
    x = torch.rand(150, 4, generator=generator, dtype=torch.float64)
    y = (x.sum(-1) - 2) ** 2 + 0.05 * torch.randn(150, generator=generator, dtype=torch.float64)
    covar = ScaleKernel(
        PolynomialSketchKernel(64, num_dims=4, degree=2, sketch="srht", complex=is_complex, bias=1.0, seed=0)
    )
    model = ExactGPModel(x, y, gpytorch.likelihoods.GaussianLikelihood(), covar).double()
    losses = train_by_mll(model, x, y, steps=50)
    assert losses[-1] < losses[0] - 0.5
    model.eval()
    test_x = torch.rand(60, 4, generator=generator, dtype=torch.float64)
    test_y = (test_x.sum(-1) - 2) ** 2
    posterior = model(test_x)
    assert isinstance(model.prediction_strategy, FeatureSpacePredictionStrategy)
    assert (posterior.mean - test_y).square().mean().sqrt() < 0.2 * test_y.std()
    assert (posterior.variance > 0).all()


def test_bad_input_errors():
    with pytest.raises(ValueError, match="degree"):
        PolynomialSketchKernel(16, num_dims=2, degree=-1)
    with pytest.raises(ValueError, match="complex TensorSketch is not supported"):
        PolynomialSketchKernel(16, num_dims=2, sketch="tensorsketch", complex=True)
    with pytest.raises(ValueError, match="bias"):
        PolynomialSketchKernel(16, num_dims=2, bias=-1.0)
    with pytest.raises(ValueError, match="'srht'"):
        PolynomialSketchKernel(16, num_dims=2, sketch="hadamard")
    with pytest.raises(ValueError, match="num_dims"):
        PolynomialSketchKernel(16)
