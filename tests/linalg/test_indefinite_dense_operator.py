"""IndefiniteDenseLinearOperator: a dense indefinite kernel matrix whose batch, indexing and scaling operations keep
the guard against PSD operations, and which plus a diagonal becomes a ridge-regression system; linear_operator's
LinearOperatorTestCase with the PSD checks refused."""

from __future__ import annotations

import unittest

import pytest
import torch
from linear_operator.operators import DiagLinearOperator

from gprf.exceptions import IndefiniteKernelError
from gprf.linalg import IndefiniteDenseAddedDiagLinearOperator, IndefiniteDenseLinearOperator
from gprf.testing import IndefiniteLinearOperatorTestCase, indefinite_factors


def _matrix(batch=(), n=5, seed=0) -> torch.Tensor:
    """A symmetric matrix with eigenvalues of both signs."""
    a = torch.randn(*batch, n, n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return a + a.mT


def test_operations_keep_the_guard():
    matrix = _matrix(batch=(2,))
    operator = IndefiniteDenseLinearOperator(matrix)
    transformed = {
        "scale": (operator * 3.0, 3.0 * matrix),
        "slice": (operator[1, 1:4, 0:2], matrix[1, 1:4, 0:2]),
        "expand": (operator.expand(3, 2, 5, 5), matrix.expand(3, 2, 5, 5)),
        "transpose": (operator.mT, matrix.mT),
        "permute": (operator.expand(3, 2, 5, 5).permute(1, 0, 2, 3), matrix.unsqueeze(1).expand(2, 3, 5, 5)),
        "unsqueeze": (operator.unsqueeze(0), matrix.unsqueeze(0)),
    }
    for name, (result, expected) in transformed.items():
        assert isinstance(result, IndefiniteDenseLinearOperator), name
        torch.testing.assert_close(result.to_dense(), expected, msg=name)
        with pytest.raises(IndefiniteKernelError, match="Cholesky"):
            result.cholesky()


def test_adding_a_diagonal_gives_the_ridge_system():
    matrix = _matrix()
    operator = IndefiniteDenseLinearOperator(matrix)
    noise = torch.linspace(0.1, 0.5, 5, dtype=torch.float64)
    eye = torch.eye(5, dtype=torch.float64)
    for noisy, expected in (
        (operator.add_diagonal(noise), matrix + torch.diag(noise)),
        (operator + DiagLinearOperator(noise), matrix + torch.diag(noise)),
        (operator.add_diagonal(torch.tensor(0.2, dtype=torch.float64)), matrix + 0.2 * eye),
        (operator.add_jitter(1e-2), matrix + 1e-2 * eye),
    ):
        assert isinstance(noisy, IndefiniteDenseAddedDiagLinearOperator)
        torch.testing.assert_close(noisy.to_dense(), expected)


# ---------------------------------------------------------------------------------------- linear_operator's case


class TestIndefiniteDenseOperatorCase(IndefiniteLinearOperatorTestCase, unittest.TestCase):
    """linear_operator's checks on Q diag(eigenvalues) Q^T; the PSD ones are refused (see the kit's case)."""

    seed = 0
    batch_shape = ()

    def create_linear_op(self):
        basis, eigenvalues = indefinite_factors(self.batch_shape)
        return IndefiniteDenseLinearOperator((basis * eigenvalues) @ basis.mT)

    def evaluate_linear_op(self, linear_op):
        return linear_op.tensor


class TestIndefiniteDenseOperatorCaseBatch(TestIndefiniteDenseOperatorCase):
    seed = 1
    batch_shape = (3,)


class TestIndefiniteDenseOperatorCaseMultiBatch(TestIndefiniteDenseOperatorCase):
    seed = 2
    batch_shape = (2, 3)
