"""gprf.kernels.exact.compositional: the exact compositional kernel of a skeleton — GPyTorch's BaseKernelTestCase, the
skeleton's kernel of lengthscale-scaled inputs, and the checks of its input dimension."""

from __future__ import annotations

import unittest

import pytest
import torch

from gprf.features import Skeleton
from gprf.kernels.exact import CompositionalKernel
from gprf.kernels.exact.compositional import check_skeleton_dims
from gprf.testing import InputDimKernelTestCase, num_dims_of


class TestCompositionalKernel(InputDimKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return CompositionalKernel(
            Skeleton.convolutional(num_dims_of(kwargs, 2), 2, 1, 1, "relu", base_kernel="gaussian"), **kwargs
        )

    def create_kernel_ard(self, num_dims, **kwargs):
        skeleton = Skeleton.fully_connected(num_dims, 2, "exponential")
        return CompositionalKernel(skeleton, ard_num_dims=num_dims, **kwargs)


def test_values_are_the_skeleton_kernel_of_scaled_inputs():
    skeleton = Skeleton.fully_connected(3, 2, "relu")
    kernel = CompositionalKernel(skeleton, ard_num_dims=3).double()
    kernel.lengthscale = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    x = torch.rand(6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    z = x / kernel.lengthscale
    torch.testing.assert_close(kernel(x).to_dense(), skeleton.kernel(z, z))
    torch.testing.assert_close(kernel(x, diag=True), skeleton.kernel(z, z, diag=True))


def test_the_input_dimension_is_the_skeletons():
    skeleton = Skeleton.fully_connected(4, 1, "relu")
    assert check_skeleton_dims(skeleton, {"ard_num_dims": 4, "active_dims": [0, 1, 2, 5]}, "K") == 4
    with pytest.raises(ValueError, match="K: active_dims selects 2 columns but the skeleton reads 4"):
        check_skeleton_dims(skeleton, {"active_dims": [0, 1]}, "K")
    with pytest.raises(ValueError, match="K: ard_num_dims=3 does not match num_dims=4"):
        check_skeleton_dims(skeleton, {"ard_num_dims": 3}, "K")
    with pytest.raises(TypeError, match="K: skeleton must be a gprf.features.Skeleton, got int"):
        check_skeleton_dims(4, {}, "K")
    with pytest.raises(ValueError, match="active_dims selects 2 columns but the skeleton reads 4"):
        CompositionalKernel(skeleton, active_dims=[0, 1])
    with pytest.raises(ValueError, match=r"\(\.\.\., n, 4\)"):
        CompositionalKernel(skeleton)(torch.zeros(3, 5)).to_dense()
