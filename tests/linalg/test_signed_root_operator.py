"""SignedRootLinearOperator: K = L diag(s) R^T with a fixed signature — values, structure-preserving batch, indexing
and scaling operations, adding noise, and the PSD operations it refuses; linear_operator's LinearOperatorTestCase (the
PSD checks refused) and, for cross covariances, RectangularLinearOperatorTestCase."""

from __future__ import annotations

import unittest

import pytest
import torch
from linear_operator.operators import DiagLinearOperator
from linear_operator.test.linear_operator_test_case import RectangularLinearOperatorTestCase

from gprf.exceptions import IndefiniteKernelError
from gprf.linalg import SignedRootAddedDiagLinearOperator, SignedRootLinearOperator
from gprf.testing import IndefiniteLinearOperatorTestCase, indefinite_factors


def _roots(batch=(), n=6, m=5, r=4, seed=0):
    generator = torch.Generator().manual_seed(seed)
    left = torch.randn(*batch, n, r, generator=generator, dtype=torch.float64)
    right = torch.randn(*batch, m, r, generator=generator, dtype=torch.float64)
    signature = torch.tensor([1.0, 1.0, -1.0, -1.0], dtype=torch.float64)
    return left, right, signature


def test_values_products_and_diagonal():
    left, right, signature = _roots()
    operator = SignedRootLinearOperator(left, right, signature)
    dense = left @ torch.diag(signature) @ right.mT
    assert operator.shape == (6, 5)
    torch.testing.assert_close(operator.to_dense(), dense)
    rhs = torch.randn(5, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    torch.testing.assert_close(operator @ rhs, dense @ rhs)
    torch.testing.assert_close(operator.mT.to_dense(), dense.mT)
    square = SignedRootLinearOperator(left, left, signature)
    torch.testing.assert_close(square.diagonal(), (left @ torch.diag(signature) @ left.mT).diagonal())


def test_roots_broadcast_over_batch_dimensions():
    left, _, signature = _roots(batch=(3,))
    right = _roots(seed=2)[1]  # no batch dimension: shared by the batch
    operator = SignedRootLinearOperator(left, right, signature)
    assert operator.shape == (3, 6, 5)
    torch.testing.assert_close(operator.to_dense(), (left * signature) @ right.mT)


def test_batch_operations_indexing_and_scaling_keep_the_structure():
    left, right, signature = _roots(batch=(2,))
    operator = SignedRootLinearOperator(left, right, signature)
    dense = operator.to_dense()
    transformed = {
        "expand": (operator.expand(4, 2, 6, 5), dense.expand(4, 2, 6, 5)),
        "unsqueeze": (operator.unsqueeze(0), dense.unsqueeze(0)),
        "permute": (
            operator.unsqueeze(0).expand(3, 2, 6, 5).permute(1, 0, 2, 3),
            dense.expand(3, 2, 6, 5).permute(1, 0, 2, 3),
        ),
        "slice": (operator[1, 2:5, 1:3], dense[1, 2:5, 1:3]),
        "scale": (operator * 2.5, 2.5 * dense),
        "negative scale": (operator * -1.0, -dense),
    }
    for name, (result, expected) in transformed.items():
        assert isinstance(result, SignedRootLinearOperator), name
        torch.testing.assert_close(result.to_dense(), expected, msg=name)
    # Scaling multiplies the left root only: the signature is fixed.
    assert torch.equal((operator * 2.5).signature, signature)
    rows, columns = torch.tensor([0, 3, 5]), torch.tensor([4, 0, 2])
    torch.testing.assert_close(operator[1, rows, columns], dense[1, rows, columns])


@pytest.mark.parametrize("diag", ["scalar", "per-row"])
def test_adding_a_diagonal_gives_the_woodbury_operator(diag):
    left, _, signature = _roots()
    operator = SignedRootLinearOperator(left, left, signature)
    values = torch.linspace(0.1, 0.6, 6, dtype=torch.float64)
    if diag == "scalar":
        values = torch.tensor(0.3, dtype=torch.float64)
    expected = operator.to_dense() + torch.diag(values.expand(6))
    for noisy in (operator.add_diagonal(values), operator + DiagLinearOperator(values.expand(6))):
        assert isinstance(noisy, SignedRootAddedDiagLinearOperator)
        torch.testing.assert_close(noisy.to_dense(), expected)
    jittered = operator.add_jitter(1e-2)
    assert isinstance(jittered, SignedRootAddedDiagLinearOperator)
    torch.testing.assert_close(jittered.to_dense(), operator.to_dense() + 1e-2 * torch.eye(6, dtype=torch.float64))


def test_psd_operations_are_refused():
    left, _, signature = _roots()
    operator = SignedRootLinearOperator(left, left, signature)
    with pytest.raises(IndefiniteKernelError, match="Cholesky"):
        operator.cholesky()
    with pytest.raises(IndefiniteKernelError, match="root decomposition"):
        operator.root_decomposition()
    with pytest.raises(IndefiniteKernelError, match="alone"):
        operator.solve(torch.ones(6, 1, dtype=torch.float64))


# ---------------------------------------------------------------------------------------- linear_operator's case


class TestSignedRootOperatorCase(IndefiniteLinearOperatorTestCase, unittest.TestCase):
    """linear_operator's checks on L diag(s) L^T = Q diag(eigenvalues) Q^T; the PSD ones are refused (see the kit's
    case). The case builds the roots as two tensors (left and right), as a signed kernel's covariance has them."""

    seed = 0
    batch_shape = ()

    def create_linear_op(self):
        basis, eigenvalues = indefinite_factors(self.batch_shape)
        root = basis * eigenvalues.abs().sqrt()
        return SignedRootLinearOperator(root, root.clone(), eigenvalues.sign())

    def evaluate_linear_op(self, linear_op):
        return (linear_op.left * linear_op.signature) @ linear_op.right.mT


class TestSignedRootOperatorCaseBatch(TestSignedRootOperatorCase):
    seed = 1
    batch_shape = (3,)


class TestSignedRootOperatorCaseMultiBatch(TestSignedRootOperatorCase):
    seed = 2
    batch_shape = (2, 3)


class TestSignedRootCrossOperatorCase(RectangularLinearOperatorTestCase, unittest.TestCase):
    """linear_operator's checks of rectangular operators on a cross covariance L diag(s) R^T (L and R of different
    points)."""

    seed = 3

    def create_linear_op(self):
        return SignedRootLinearOperator(
            torch.randn(2, 5, 4), torch.randn(2, 3, 4), torch.tensor([1.0, 1.0, -1.0, -1.0])
        )

    def evaluate_linear_op(self, linear_op):
        return (linear_op.left * linear_op.signature) @ linear_op.right.mT
