"""DeltaGaussianKernel: the exact (indefinite for negative weights) weighted sum of Gaussians, its guarded dense
evaluations, and kernel ridge regression with it."""

from __future__ import annotations

import pytest
import torch

from gprf.exceptions import IndefiniteKernelError
from gprf.kernels.exact import DeltaGaussianKernel
from gprf.linalg import IndefiniteDenseLinearOperator
from gprf.prediction import krein_ridge_mean
from gprf.testing import regression_data


def _kernel() -> DeltaGaussianKernel:
    kernel = DeltaGaussianKernel([2.0, -1.0], [1.0, 3.0], ard_num_dims=3).double()
    kernel.lengthscale = torch.tensor([0.4, 0.7, 1.1], dtype=torch.float64)
    return kernel


def test_values_are_the_weighted_gaussians_of_scaled_distances():
    """k(x, y) = 2 exp(-|z|^2 / 2) - exp(-|z|^2 / 18), z = (x - y) / lengthscale."""
    x, _ = regression_data(12)
    y, _ = regression_data(5, seed=1)
    kernel = _kernel()
    squared = torch.cdist(x / kernel.lengthscale, y / kernel.lengthscale).square()
    expected = 2 * torch.exp(-squared / 2) - torch.exp(-squared / 18)
    covariance = kernel(x, y).evaluate_kernel()
    assert isinstance(covariance, IndefiniteDenseLinearOperator)
    torch.testing.assert_close(covariance.to_dense(), expected)
    torch.testing.assert_close(kernel(x, diag=True), torch.ones(12, dtype=torch.float64))  # 2 - 1 at distance 0
    assert torch.linalg.eigvalsh(kernel(x).to_dense()).min() < 0  # indefinite


def test_psd_operations_raise_and_ridge_regression_is_the_dense_solve():
    x, _ = regression_data(20)
    exact = _kernel()
    with pytest.raises(IndefiniteKernelError, match="Cholesky"):
        exact(x).evaluate_kernel().cholesky()
    y = torch.sin(x.sum(-1))
    dense = exact(x[:5], x).to_dense() @ torch.linalg.solve(
        exact(x).to_dense() + 0.1 * torch.eye(20, dtype=torch.float64), y
    )
    torch.testing.assert_close(krein_ridge_mean(exact, x, y, x[:5], 0.1), dense)


def test_bad_spectrum_is_refused():
    with pytest.raises(ValueError, match="equal length, got 2 and 1"):
        DeltaGaussianKernel([1.0, -1.0], [1.0])
    with pytest.raises(ValueError, match="lengthscales must be positive"):
        DeltaGaussianKernel([1.0, -1.0], [1.0, -2.0])
