"""gprf.testing.linear_operators: the indefinite test matrix, and the indefinite cases catching operators that do not
refuse PSD operations (the cases passing on gprf's operators are in tests/linalg/)."""

from __future__ import annotations

import unittest

import pytest
import torch
from linear_operator.operators import DenseLinearOperator

from gprf.linalg import IndefiniteGuard
from gprf.testing import IndefiniteLinearOperatorTestCase, indefinite_factors


def test_indefinite_factors():
    basis, eigenvalues = indefinite_factors((2,))
    assert basis.shape == (2, 5, 5)
    torch.testing.assert_close(basis.mT @ basis, torch.eye(5).expand(2, 5, 5), rtol=0, atol=1e-5)
    matrix = (basis * eigenvalues) @ basis.mT
    torch.testing.assert_close(torch.linalg.eigvalsh(matrix), eigenvalues.expand(2, 5), rtol=0, atol=1e-5)
    assert (eigenvalues < 0).any() and (eigenvalues > 0).any() and eigenvalues.abs().min() >= 1.0


class _GuardLostOnTranspose(IndefiniteGuard, DenseLinearOperator):
    """Guarded, but its transpose is a plain DenseLinearOperator."""

    def _transpose_nonbatch(self):
        return DenseLinearOperator(self.tensor.mT)


def _case(operator_class) -> IndefiniteLinearOperatorTestCase:
    class Case(IndefiniteLinearOperatorTestCase, unittest.TestCase):
        seed = 0

        def create_linear_op(self):
            basis, eigenvalues = indefinite_factors()
            return operator_class((basis * eigenvalues) @ basis.mT)

        def evaluate_linear_op(self, linear_op):
            return linear_op.tensor

    return Case("test_cholesky")


def test_the_case_catches_an_operator_that_factors_an_indefinite_matrix():
    # A plain operator attempts the Cholesky factor and fails with linear_operator's own error, not the clear one.
    with pytest.raises(Exception, match="not positive definite") as info:
        _case(DenseLinearOperator).test_cholesky()
    assert type(info.value).__name__ == "NotPSDError"


def test_the_case_catches_a_transpose_that_drops_the_guard():
    with pytest.raises(AssertionError, match="transpose lost the guard"):
        _case(_GuardLostOnTranspose).test_structure_preserving_operations_keep_the_guard()
