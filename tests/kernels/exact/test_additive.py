"""gprf.kernels.exact.additive: the exact first- and second-order additive kernels — GPyTorch's BaseKernelTestCase,
GPyTorch's AdditiveStructureKernel at first order, Newton's identity at second order, a spectrum object for the
profile, and construction errors."""

from __future__ import annotations

import unittest
import warnings

import gpytorch
import pytest
import torch
from gpytorch.kernels import AdditiveStructureKernel, MaternKernel, RBFKernel

from gprf.features import SPECTRA
from gprf.kernels.exact import ExactAdditiveKernel


class TestExactAdditiveKernel(unittest.TestCase, gpytorch.test.base_kernel_test_case.BaseKernelTestCase):
    def create_kernel_no_ard(self, **kwargs):
        return ExactAdditiveKernel(order=2, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return ExactAdditiveKernel(kernel="matern32", ard_num_dims=num_dims, **kwargs)


def _x(n: int = 8, d: int = 4, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("kernel", ["rbf", "matern12", "matern52"])
def test_first_order_is_gpytorchs_additive_structure_kernel(kernel):
    exact = ExactAdditiveKernel(kernel=kernel, ard_num_dims=4).double()
    exact.lengthscale = torch.tensor([[0.5, 0.9, 1.3, 2.0]], dtype=torch.float64)
    base = RBFKernel(ard_num_dims=4) if kernel == "rbf" else MaternKernel(nu=float(kernel[-2]) / 2, ard_num_dims=4)
    base.lengthscale = exact.lengthscale.detach()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # GPyTorch deprecates the class and last_dim_is_batch
        reference = AdditiveStructureKernel(base.double(), num_dims=4)
        x, y = _x(), _x(5, seed=1)
        torch.testing.assert_close(exact(x, y).to_dense(), reference(x, y).to_dense())
        torch.testing.assert_close(exact(x, diag=True), reference(x, diag=True))


def test_second_order_adds_the_pairwise_products_weighted_by_tau():
    exact = ExactAdditiveKernel(order=2).double()
    exact.interaction_variance = 0.3
    x, y = _x(d=3), _x(5, d=3, seed=1)
    per_dim = [RBFKernel().double()(x[:, [j]], y[:, [j]]).to_dense() for j in range(3)]
    pairs = per_dim[0] * per_dim[1] + per_dim[0] * per_dim[2] + per_dim[1] * per_dim[2]
    torch.testing.assert_close(exact(x, y).to_dense(), sum(per_dim) + 0.3 * pairs)


def test_a_spectrum_object_is_its_name():
    by_name = ExactAdditiveKernel(kernel="matern32").double()
    by_spectrum = ExactAdditiveKernel(kernel=SPECTRA["matern32"]).double()
    assert by_spectrum.kernel == "matern32"
    x = _x()
    torch.testing.assert_close(by_spectrum(x).to_dense(), by_name(x).to_dense(), rtol=0, atol=0)


def test_bad_input_errors():
    with pytest.raises(ValueError, match="order must be 1 or 2"):
        ExactAdditiveKernel(order=0)
    with pytest.raises(ValueError, match="Unknown kernel 'cosine'; valid choices are: 'rbf'"):
        ExactAdditiveKernel(kernel="cosine")
