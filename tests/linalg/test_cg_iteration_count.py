"""cg_iterations: linear_operator's CG iterations to each tolerance, against a textbook preconditioned CG, the exact
termination of CG on few distinct eigenvalues, a perfect preconditioner, the iteration cap and bad tolerances."""

from __future__ import annotations

import pytest
import torch

from gprf.linalg import cg_iterations


def spd_matrix(num_points=60, seed=0):
    generator = torch.Generator().manual_seed(seed)
    basis = torch.linalg.qr(torch.randn(num_points, num_points, generator=generator, dtype=torch.float64)).Q
    eigenvalues = torch.logspace(-1, 1, num_points, dtype=torch.float64)
    return (basis * eigenvalues) @ basis.mT


def textbook_iterations(matrix, rhs, preconditioner, tol):
    """Preconditioned CG from x = 0; the first k with ||r_k|| / ||b|| < tol."""
    x = torch.zeros_like(rhs)
    residual = rhs.clone()
    z = preconditioner(residual)
    direction = z.clone()
    for k in range(10 * matrix.size(0)):
        if residual.norm() / rhs.norm() < tol:
            return k
        product = matrix @ direction
        alpha = (residual * z).sum() / (direction * product).sum()
        x = x + alpha * direction
        new_residual = residual - alpha * product
        new_z = preconditioner(new_residual)
        beta = (new_residual * new_z).sum() / (residual * z).sum()
        residual, z = new_residual, new_z
        direction = z + beta * direction
    return None


@pytest.mark.parametrize("preconditioned", [False, True])
def test_counts_match_a_textbook_conjugate_gradient(preconditioned):
    matrix = spd_matrix()
    rhs = torch.randn(60, 1, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    diagonal = matrix.diagonal().unsqueeze(-1)
    preconditioner = (lambda r: r / diagonal) if preconditioned else None
    tolerances = (1e-1, 1e-2, 1e-3)
    counts = cg_iterations(matrix.matmul, rhs, preconditioner, tolerances)
    reference = preconditioner if preconditioned else torch.clone
    assert counts == {tol: textbook_iterations(matrix, rhs, reference, tol) for tol in tolerances}


def test_cg_ends_after_as_many_iterations_as_distinct_eigenvalues():
    matrix = torch.diag(torch.tensor([1.0, 3.0, 10.0, 30.0, 100.0], dtype=torch.float64).repeat_interleave(4))
    rhs = torch.ones(20, 1, dtype=torch.float64)
    counts = cg_iterations(matrix.matmul, rhs, tolerances=(1e-4,))
    assert counts == {1e-4: 5}


def test_a_perfect_preconditioner_takes_one_iteration():
    matrix = spd_matrix()
    rhs = torch.randn(60, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    counts = cg_iterations(matrix.matmul, rhs, lambda r: torch.linalg.solve(matrix, r), (1e-3,))
    assert counts == {1e-3: 1}


def test_tolerances_not_reached_within_max_iter_are_none():
    matrix = spd_matrix()
    rhs = torch.randn(60, 1, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    assert cg_iterations(matrix.matmul, rhs, tolerances=(1e-4,), max_iter=3) == {1e-4: None}


@pytest.mark.parametrize("tolerances", [(), (0.0,), (1.5,)])
def test_tolerances_must_lie_between_zero_and_one(tolerances):
    with pytest.raises(ValueError, match="tolerances must be numbers in"):
        cg_iterations(torch.eye(3).matmul, torch.ones(3, 1), tolerances=tolerances)
