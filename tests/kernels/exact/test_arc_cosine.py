"""ArcCosineKernel, the exact arc-cosine kernels of order 0 and 1: GPyTorch's BaseKernelTestCase, Cho & Saul's closed
forms, batch indexing without parameters, and the scale-free construction errors."""

from __future__ import annotations

import math
import unittest

import gpytorch
import pytest
import torch

from gprf.kernels.exact import ArcCosineKernel
from gprf.testing import InputDimKernelTestCase


class TestArcCosineKernel(InputDimKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        kwargs.pop("num_dims", None)
        return ArcCosineKernel(order=1, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return ArcCosineKernel(order=0, **kwargs)

    def test_kernel_dtype_device(self):
        # Without parameters or buffers GPyTorch reports device None: nothing to move.
        kernel = ArcCosineKernel(order=1)
        assert kernel.device is None and kernel.dtype == torch.get_default_dtype()


def test_closed_forms_of_cho_and_saul():
    """k0 = 1 - theta / pi and k1 = |x||y| (sin theta + (pi - theta) cos theta) / pi, theta the angle of x and y."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(6, 3, generator=generator, dtype=torch.float64)
    y = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    norms = x.norm(dim=-1, keepdim=True) * y.norm(dim=-1)
    theta = torch.arccos((x @ y.mT / norms).clamp(-1.0, 1.0))
    k0 = ArcCosineKernel(order=0)(x, y).to_dense()
    k1 = ArcCosineKernel(order=1)(x, y).to_dense()
    torch.testing.assert_close(k0, 1 - theta / math.pi)
    torch.testing.assert_close(k1, norms * (torch.sin(theta) + (math.pi - theta) * torch.cos(theta)) / math.pi)
    torch.testing.assert_close(ArcCosineKernel(order=1)(x, diag=True), x.square().sum(-1))  # theta = 0: |x|^2
    # A zero input has angle pi / 2 to everything.
    zero = torch.zeros(1, 3, dtype=torch.float64)
    torch.testing.assert_close(
        ArcCosineKernel(order=0)(zero, y).to_dense(), torch.full((1, 4), 0.5, dtype=torch.float64)
    )


def test_batch_shape_and_indexing_without_parameters():
    x = torch.randn(5, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    kernel = ArcCosineKernel(order=1, batch_shape=torch.Size([3]))
    covariance = kernel(x).to_dense()
    assert covariance.shape == (3, 5, 5)
    member = kernel[1]
    assert member.batch_shape == torch.Size()
    torch.testing.assert_close(member(x).to_dense(), covariance[1], rtol=0, atol=0)
    with pytest.raises(NotImplementedError, match="last_dim_is_batch"):
        kernel.forward(x, x, last_dim_is_batch=True)


def test_scale_free_lengthscale_errors():
    for name, value in (
        ("ard_num_dims", 3),
        ("lengthscale_prior", gpytorch.priors.GammaPrior(2.0, 1.0)),
        ("lengthscale_constraint", gpytorch.constraints.Positive()),
    ):
        with pytest.raises(ValueError, match="scale-free"):
            ArcCosineKernel(order=0, **{name: value})
    assert not ArcCosineKernel.has_lengthscale


def test_bad_input():
    for order in (2, True, 0.5):
        with pytest.raises(ValueError, match="order must be 0 or 1"):
            ArcCosineKernel(order=order)
