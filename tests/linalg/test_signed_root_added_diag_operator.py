"""SignedRootAddedDiagLinearOperator: Woodbury solves of L diag(s) R^T + noise in the factor dtype, ridge-regression
quadratic forms, and the clear error for a singular system; linear_operator's LinearOperatorTestCase with the PSD
checks refused."""

from __future__ import annotations

import unittest

import pytest
import torch

from gprf.exceptions import IndefiniteKernelError
from gprf.kernels import SignedRandomFeatureKernel
from gprf.linalg import SignedRootLinearOperator
from gprf.testing import IndefiniteAddedDiagLinearOperatorTestCase, indefinite_factors
from tests.helpers.regression import SPECTRUM


def _system(batch=(), n=30, r=8, dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    root = torch.randn(*batch, n, r, generator=generator, dtype=torch.float64)
    noise = 0.5 + torch.rand(*batch, n, generator=generator, dtype=torch.float64)
    signature = torch.tensor([1.0] * (r // 2) + [-1.0] * (r // 2), dtype=torch.float64)
    operator = SignedRootLinearOperator(root.to(dtype), root.to(dtype), signature.to(dtype)).add_diagonal(
        noise.to(dtype)
    )
    dense = (root * signature) @ root.mT + torch.diag_embed(noise)
    return operator, dense


@pytest.mark.parametrize("batch", [(), (2,)])
def test_solve_equals_the_dense_solve(batch):
    operator, dense = _system(batch)
    assert torch.linalg.eigvalsh(dense).min() < 0  # an indefinite system
    rhs = torch.randn(*batch, 30, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    # The Woodbury identity in float64 against a dense LU solve: both backward stable, and the system's condition number
    # is about 1e2 here, so they agree to ~1e-13; the tolerance leaves three orders of magnitude.
    torch.testing.assert_close(operator.solve(rhs), torch.linalg.solve(dense, rhs), rtol=1e-9, atol=1e-10)
    if not batch:  # a vector right-hand side
        torch.testing.assert_close(
            operator.solve(rhs[:, 0]), torch.linalg.solve(dense, rhs[:, 0]), rtol=1e-9, atol=1e-10
        )
    left = torch.randn(4, 30, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    torch.testing.assert_close(operator.solve(rhs, left), left @ torch.linalg.solve(dense, rhs), rtol=1e-9, atol=1e-10)


def test_quadratic_forms_and_refused_log_determinant():
    operator, dense = _system()
    rhs = torch.randn(30, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    expected = (rhs * torch.linalg.solve(dense, rhs)).sum(-2)
    torch.testing.assert_close(operator.inv_quad(rhs, reduce_inv_quad=False), expected, rtol=1e-9, atol=1e-10)
    inv_quad, logdet = operator.inv_quad_logdet(rhs, logdet=False)
    torch.testing.assert_close(inv_quad, expected.sum(), rtol=1e-9, atol=1e-10)
    assert logdet is None
    with pytest.raises(IndefiniteKernelError, match="log-determinant"):
        operator.inv_quad_logdet(rhs, logdet=True)


def test_float32_operands_are_solved_in_the_factor_dtype():
    operator32, dense = _system(dtype=torch.float32)
    rhs = torch.randn(30, 1, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    solution = operator32.solve(rhs.float())
    assert solution.dtype == torch.float32
    reference = torch.linalg.solve(dense, rhs)
    # Only the float32 rounding of the operands and of the result remains: relative 6e-8 times the condition number
    # (about 1e2) bounds the error by ~1e-5 relative.
    torch.testing.assert_close(solution.double(), reference, rtol=1e-5, atol=1e-5)


def test_singular_ridge_system_raises():
    x = torch.nn.functional.normalize(
        torch.randn(6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64), dim=-1
    )
    kernel = SignedRandomFeatureKernel(4, SPECTRUM, num_dims=3, seed=0).double()
    covar = kernel(x).evaluate_kernel()
    eigenvalue = torch.linalg.eigvalsh(covar.to_dense())[0]  # negative: minus it makes K + s^2 I singular
    assert eigenvalue < 0
    with pytest.raises(IndefiniteKernelError, match="singular"):
        covar.add_diagonal(-eigenvalue.expand(6)).solve(torch.ones(6, 1, dtype=torch.float64))


# ---------------------------------------------------------------------------------------- linear_operator's case
NOISE = 0.5  # the eigenvalues of the kit's indefinite matrix plus NOISE: -1.5 ... 4.5


class TestSignedRootAddedDiagOperatorCase(IndefiniteAddedDiagLinearOperatorTestCase, unittest.TestCase):
    """linear_operator's checks on Q diag(eigenvalues) Q^T + noise from signed roots: Woodbury solves, the PSD checks
    refused (see the kit's case)."""

    seed = 0
    batch_shape = ()

    def create_linear_op(self):
        basis, eigenvalues = indefinite_factors(self.batch_shape)
        root = basis * eigenvalues.abs().sqrt()
        noise = torch.full((*self.batch_shape, 5), NOISE)
        return SignedRootLinearOperator(root, root.clone(), eigenvalues.sign()).add_diagonal(noise)

    def evaluate_linear_op(self, linear_op):
        roots, noise = linear_op._linear_op, linear_op._diag_tensor.diagonal(dim1=-2, dim2=-1)
        return (roots.left * roots.signature) @ roots.right.mT + torch.diag_embed(noise)


class TestSignedRootAddedDiagOperatorCaseBatch(TestSignedRootAddedDiagOperatorCase):
    seed = 1
    batch_shape = (3,)


class TestSignedRootAddedDiagOperatorCaseMultiBatch(TestSignedRootAddedDiagOperatorCase):
    seed = 2
    batch_shape = (2, 3)
