"""OffsetPolynomialSketchKernel: GPyTorch's BaseKernelTestCase, unbiased for GPyTorch's PolynomialKernel with the
tied, trainable offset (Monte-Carlo mean within the closed-form variance), gradients reach the offset, and errors."""

from __future__ import annotations

import unittest

import pytest
import torch
from gpytorch.kernels import PolynomialKernel

from gprf.kernels import OffsetPolynomialSketchKernel
from gprf.testing import SEED, FeatureKernelTestCase, diagonal_draws, num_dims_of

Z_BOUND = 4.5


class TestOffsetPolynomialSketchKernel(FeatureKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return OffsetPolynomialSketchKernel(64, num_dims_of(kwargs, 2), degree=2, seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        kwargs.pop("ard_num_dims", None)  # GPyTorch's polynomial kernel has no lengthscale
        return OffsetPolynomialSketchKernel(64, num_dims, degree=2, seed=SEED, **kwargs)


def _x(n: int = 6, d: int = 3, seed: int = 0) -> torch.Tensor:
    return 0.5 * torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("sketch", ["gaussian", "srht"])
def test_unbiased_for_the_tied_polynomial_kernel(sketch, float64):
    num_draws = 300
    kernel = OffsetPolynomialSketchKernel(16, num_dims=3, degree=3, sketch=sketch, seed=0)
    kernel.offset = 0.7
    exact = kernel.exact()
    assert isinstance(exact, PolynomialKernel) and exact.raw_offset is kernel.raw_offset and exact.power == 3
    x, y = _x(), _x(seed=1)
    torch.testing.assert_close(kernel.expected_kernel(x, y), exact(x, y, diag=True).detach())
    values = diagonal_draws(kernel, x, y, num_draws)
    variance = kernel.variance(x, y).detach()
    assert ((values.mean(0) - exact(x, y, diag=True).detach()) / (variance / num_draws).sqrt()).abs().max() < Z_BOUND


def test_gradients_reach_the_offset_and_float32_works():
    kernel = OffsetPolynomialSketchKernel(32, num_dims=3, degree=2, seed=0)
    kernel(_x().float()).to_dense().sum().backward()
    assert kernel.raw_offset.grad is not None and kernel.raw_offset.grad.abs() > 0
    assert kernel.dtype == torch.float32 and kernel.double().dtype == torch.float64


def test_bad_input_errors():
    with pytest.raises(ValueError, match="degree"):
        OffsetPolynomialSketchKernel(8, num_dims=3, degree=-1)
    with pytest.raises(ValueError, match="num_dims=4"):
        OffsetPolynomialSketchKernel(8, num_dims=3)(_x(d=4)).to_dense()
