"""gprf.kernels.exact.dot_product: the exact dot-product kernels with a lengthscale (scaled polynomial, exponential) —
GPyTorch's BaseKernelTestCase and their formulas, and how the exponential one builds the RBF kernel."""

from __future__ import annotations

import unittest

import gpytorch
import pytest
import torch

from gprf.kernels.exact import DotProductKernel, ExponentialDotProductKernel, ScaledPolynomialKernel


class TestScaledPolynomialKernel(unittest.TestCase, gpytorch.test.base_kernel_test_case.BaseKernelTestCase):
    def create_kernel_no_ard(self, **kwargs):
        return ScaledPolynomialKernel(degree=3, bias=0.5, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return ScaledPolynomialKernel(degree=3, bias=0.5, ard_num_dims=num_dims, **kwargs)


def _x(n=12, d=3, seed=0):
    return torch.rand(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_exact_kernels_match_their_formulas():
    x, y = _x(), _x(7, seed=1)
    poly = ScaledPolynomialKernel(degree=3, bias=0.5, ard_num_dims=3).double()
    poly.lengthscale = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    expected = ((x / poly.lengthscale) @ (y / poly.lengthscale).mT + 0.5) ** 3
    torch.testing.assert_close(poly(x, y).to_dense(), expected)
    torch.testing.assert_close(poly(x, diag=True), ((x / poly.lengthscale).square().sum(-1) + 0.5) ** 3)
    exponential = ExponentialDotProductKernel().double()
    exponential.lengthscale = 1.3
    torch.testing.assert_close(exponential(x, y).to_dense(), torch.exp(x @ y.mT / 1.3**2))
    # exp(x.y) e^{-|x|^2/2} e^{-|y|^2/2} is the RBF kernel (what Maclaurin features build on).
    rbf = gpytorch.kernels.RBFKernel().double()
    rbf.lengthscale = 1.3
    damping = torch.exp(-0.5 * (x / 1.3).square().sum(-1))[:, None] * torch.exp(-0.5 * (y / 1.3).square().sum(-1))[None]
    torch.testing.assert_close(exponential(x, y).to_dense() * damping, rbf(x, y).to_dense())


def test_bad_arguments_and_the_abstract_profile():
    with pytest.raises(ValueError, match="degree"):
        ScaledPolynomialKernel(degree=2.5)
    with pytest.raises(ValueError, match="bias"):
        ScaledPolynomialKernel(degree=2, bias=-1.0)
    with pytest.raises(NotImplementedError):
        DotProductKernel()(_x(), diag=True)
    with pytest.raises(NotImplementedError, match="last_dim_is_batch"):
        ExponentialDotProductKernel().forward(_x(), _x(), last_dim_is_batch=True)
