"""ritz_inverse_root: the inverse itself on the whole space, the Galerkin property (never above k^T A^-1 k, exact
for A^-1 k in the subspace, the best quadratic form on it), batches, operators and dtypes."""

from __future__ import annotations

import torch
from linear_operator import to_linear_operator

from gprf.linalg import ritz_inverse_root


def spd(num_points=30, batch=(), seed=0, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    factor = torch.randn(*batch, num_points, num_points, generator=generator, dtype=dtype)
    return factor @ factor.mT / num_points + 0.1 * torch.eye(num_points, dtype=dtype)


def test_on_the_whole_space_the_root_is_of_the_inverse():
    matrix = spd()
    basis = torch.randn(30, 30, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    root = ritz_inverse_root(to_linear_operator(matrix), basis)
    torch.testing.assert_close(root @ root.mT, torch.linalg.inv(matrix))


def test_galerkin_property():
    matrix = spd()
    generator = torch.Generator().manual_seed(2)
    basis = torch.randn(30, 8, generator=generator, dtype=torch.float64)
    root = ritz_inverse_root(to_linear_operator(matrix), basis)
    inverse = torch.linalg.inv(matrix)
    # never above the exact quadratic form
    tests = torch.randn(30, 50, generator=generator, dtype=torch.float64)
    approximate = (root.mT @ tests).square().sum(0)
    exact = (tests * (inverse @ tests)).sum(0)
    assert (approximate <= exact + 1e-12).all()
    # exact when A^-1 k lies in the subspace
    inside = matrix @ basis[:, :3]
    torch.testing.assert_close((root.mT @ inside).square().sum(0), (inside * (inverse @ inside)).sum(0))
    # and the maximum of 2 u^T k - u^T A u over the subspace
    k = tests[:, 0]
    coefficients = torch.linalg.solve(basis.mT @ matrix @ basis, basis.mT @ k)
    best = 2 * (basis @ coefficients) @ k - coefficients @ basis.mT @ matrix @ basis @ coefficients
    torch.testing.assert_close(approximate[0], best)


def test_batched_float32_operators():
    matrix = spd(batch=(2,), dtype=torch.float32)
    basis = torch.randn(2, 30, 5, generator=torch.Generator().manual_seed(3))
    root = ritz_inverse_root(to_linear_operator(matrix), basis)
    assert root.shape == (2, 30, 5) and root.dtype == torch.float32
    projected = basis.double().mT @ matrix.double() @ basis.double()
    expected = basis.double() @ torch.linalg.solve(projected, basis.double().mT)
    torch.testing.assert_close((root @ root.mT).double(), expected, rtol=1e-4, atol=1e-5)
