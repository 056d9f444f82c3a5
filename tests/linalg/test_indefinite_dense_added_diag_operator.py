"""IndefiniteDenseAddedDiagLinearOperator: LU solves of a dense indefinite matrix plus noise in the factor dtype, and
the clear error for a singular system; linear_operator's LinearOperatorTestCase with the PSD checks refused."""

from __future__ import annotations

import unittest

import pytest
import torch

from gprf.exceptions import IndefiniteKernelError
from gprf.linalg import IndefiniteDenseLinearOperator
from gprf.testing import IndefiniteAddedDiagLinearOperatorTestCase, indefinite_factors


def _system(dtype=torch.float64):
    a = torch.randn(6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    matrix = a + a.mT
    noise = torch.full((6,), 0.3, dtype=torch.float64)
    operator = IndefiniteDenseLinearOperator(matrix.to(dtype)).add_diagonal(noise.to(dtype))
    return operator, matrix + torch.diag(noise)


def test_solve_equals_the_dense_solve():
    operator, dense = _system()
    assert torch.linalg.eigvalsh(dense).min() < 0
    rhs = torch.randn(6, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    expected = torch.linalg.solve(dense, rhs)
    torch.testing.assert_close(operator.solve(rhs), expected)
    torch.testing.assert_close(operator.solve(rhs[:, 0]), expected[:, 0])
    left = torch.ones(1, 6, dtype=torch.float64)
    torch.testing.assert_close(operator.solve(rhs, left), left @ expected)
    torch.testing.assert_close(operator.inv_quad(rhs), (rhs * expected).sum())


def test_float32_systems_are_solved_in_the_factor_dtype():
    operator, dense = _system(torch.float32)
    rhs = torch.randn(6, 1, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    solution = operator.solve(rhs.float())
    assert solution.dtype == torch.float32
    # float32 rounding of the operands (6e-8 relative) times the condition number of this system.
    bound = 6e-8 * torch.linalg.cond(dense) * torch.linalg.solve(dense, rhs).abs().max()
    assert (solution.double() - torch.linalg.solve(dense, rhs)).abs().max() <= 10 * bound


def test_singular_system_raises():
    matrix = torch.diag(torch.tensor([-0.5, 1.0, 2.0], dtype=torch.float64))
    operator = IndefiniteDenseLinearOperator(matrix).add_diagonal(torch.full((3,), 0.5, dtype=torch.float64))
    with pytest.raises(IndefiniteKernelError, match="singular"):
        operator.solve(torch.ones(3, 1, dtype=torch.float64))


# ---------------------------------------------------------------------------------------- linear_operator's case
NOISE = 0.5  # the eigenvalues of the kit's indefinite matrix plus NOISE: -1.5 ... 4.5


class TestIndefiniteDenseAddedDiagOperatorCase(IndefiniteAddedDiagLinearOperatorTestCase, unittest.TestCase):
    """linear_operator's checks on Q diag(eigenvalues) Q^T + noise: solves by LU, the PSD checks refused (see the kit's
    case)."""

    seed = 0
    batch_shape = ()

    def create_linear_op(self):
        basis, eigenvalues = indefinite_factors(self.batch_shape)
        noise = torch.full((*self.batch_shape, 5), NOISE)
        return IndefiniteDenseLinearOperator((basis * eigenvalues) @ basis.mT).add_diagonal(noise)

    def evaluate_linear_op(self, linear_op):
        return linear_op._linear_op.tensor + torch.diag_embed(linear_op._diag_tensor.diagonal(dim1=-2, dim2=-1))


class TestIndefiniteDenseAddedDiagOperatorCaseBatch(TestIndefiniteDenseAddedDiagOperatorCase):
    seed = 1
    batch_shape = (3,)


class TestIndefiniteDenseAddedDiagOperatorCaseMultiBatch(TestIndefiniteDenseAddedDiagOperatorCase):
    seed = 2
    batch_shape = (2, 3)
