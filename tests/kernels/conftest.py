"""Helpers shared by the kernel tests: GPyTorch's kernel test case for random-feature kernels, and the signed
random-feature kernel and model several modules' tests build on."""

from __future__ import annotations

import gpytorch
import torch
from gpytorch.kernels import ScaleKernel
from gpytorch.test.base_kernel_test_case import BaseKernelTestCase

from gprf.features import delta_gaussian_spectrum
from gprf.kernels import SignedRandomFeatureKernel
from tests.prediction.conftest import ExactModel

# A fixed seed makes two separately constructed kernels share their frequencies, which
# BaseKernelTestCase needs when it compares a kernel with active_dims against a plain one.
SEED = 1234

# An indefinite delta-Gaussian target: 2 exp(-r^2 / 2) - exp(-r^2 / 18).
SPECTRUM = delta_gaussian_spectrum([2.0, -1.0], [1.0, 3.0])


def diagonal_draws(kernel, x, y, num_draws: int) -> torch.Tensor:
    """``k(x_i, y_i)`` row by row for ``num_draws`` feature draws seeded 0, 1, ... (``resample_features``),
    stacked as ``(num_draws, n)``: the Monte-Carlo sample of unbiasedness and variance tests."""
    values = []
    for draw in range(num_draws):
        kernel.resample_features(torch.Generator().manual_seed(draw))
        values.append(kernel(x, y, diag=True).detach())
    return torch.stack(values)


def num_dims_of(kwargs: dict, default: int) -> int:
    """The input dimension of a test kernel: explicit, else that of its active dims, else ``default``."""
    if "num_dims" in kwargs:
        return kwargs.pop("num_dims")
    active_dims = kwargs.get("active_dims")
    return len(active_dims) if active_dims is not None else default


class RandomFeatureKernelTestCase(BaseKernelTestCase):
    """BaseKernelTestCase for kernels that need their input dimension at construction.

    GPyTorch's active-dims tests build the reference kernel without arguments and let it infer its
    dimension on first use; random-feature kernels draw their features in ``__init__``, so the two
    tests are repeated here with the reference kernel built for the selected columns.
    """

    def _check_active_dims(self, active_dims):
        x = self.create_data_no_batch()
        kernel = self.create_kernel_no_ard(active_dims=active_dims)
        reference = self.create_kernel_no_ard(num_dims=len(active_dims))
        self.assertAllClose(
            kernel(x).evaluate_kernel().to_dense(),
            reference(x[:, active_dims]).evaluate_kernel().to_dense(),
            rtol=1e-3,
            atol=1e-5,
        )

    def test_active_dims_list(self):
        self._check_active_dims([0, 2, 4, 6])

    def test_active_dims_range(self):
        self._check_active_dims(list(range(3, 9)))


def signed_kernel(dtype: torch.dtype = torch.float64, **kwargs) -> ScaleKernel:
    """``ScaleKernel(SignedRandomFeatureKernel)`` of :data:`SPECTRUM`, non-default outputscale and ARD lengthscale."""
    kernel = ScaleKernel(SignedRandomFeatureKernel(48, SPECTRUM, num_dims=3, ard_num_dims=3, seed=0, **kwargs)).to(
        dtype
    )
    kernel.outputscale = 1.3
    kernel.base_kernel.lengthscale = torch.tensor([0.4, 0.7, 1.1], dtype=dtype)
    return kernel


def signed_model(x: torch.Tensor, y: torch.Tensor, kernel, noise: float = 0.1) -> ExactModel:
    """An ExactGP (constant mean 0.2, Gaussian likelihood of variance ``noise``) around ``kernel``."""
    likelihood = gpytorch.likelihoods.GaussianLikelihood().to(x.dtype)
    likelihood.noise = noise
    model = ExactModel(x, y, likelihood, kernel).to(x.dtype)
    model.mean_module.constant.data.fill_(0.2)
    return model
