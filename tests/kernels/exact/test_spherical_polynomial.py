"""SphericalPolynomialKernel: the exact polynomial kernel on the unit sphere, its input check and arguments."""

from __future__ import annotations

import pytest
import torch

from gprf.kernels.exact import SphericalPolynomialKernel
from gprf.linalg import IndefiniteDenseLinearOperator
from gprf.settings import validate_inputs


def _sphere(n: int, seed: int) -> torch.Tensor:
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return torch.nn.functional.normalize(x, dim=-1)


@pytest.mark.parametrize(("a", "degree"), [(2.0, 3), (3.0, 1)])
def test_values_are_the_polynomial_of_the_inner_product(a, degree):
    """(1 - |x - y|^2 / a^2)^p = ((1 - 2 / a^2) + (2 / a^2) x.y)^p on the unit sphere."""
    x, y = _sphere(9, 0), _sphere(4, 1)
    kernel = SphericalPolynomialKernel(a, degree)
    covariance = kernel(x, y).evaluate_kernel()
    assert isinstance(covariance, IndefiniteDenseLinearOperator)
    expected = ((1 - 2 / a**2) + (2 / a**2) * (x @ y.mT)) ** degree
    torch.testing.assert_close(covariance.to_dense(), expected)
    torch.testing.assert_close(kernel(x, diag=True), torch.ones(9, dtype=torch.float64))


def test_inputs_off_the_sphere_are_refused():
    x = _sphere(5, 2)
    kernel = SphericalPolynomialKernel(2.0, 3)
    with pytest.raises(ValueError, match="unit sphere"):
        kernel(2 * x).to_dense()
    with validate_inputs(False):  # the check can be switched off (it costs a host synchronisation on a GPU)
        torch.testing.assert_close(kernel(2 * x, diag=True), torch.ones(5, dtype=torch.float64))


@pytest.mark.parametrize(
    ("a", "degree", "match"),
    [(0.0, 2, "a must be positive"), (2.0, -1, "degree"), (2.0, 1.5, "degree"), (2.0, True, "degree")],
)
def test_bad_arguments(a, degree, match):
    with pytest.raises(ValueError, match=match):
        SphericalPolynomialKernel(a, degree)
