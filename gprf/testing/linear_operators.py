r"""linear_operator's ``LinearOperatorTestCase`` for operators of indefinite kernel matrices.

gprf's indefinite operators (:class:`~gprf.linalg.IndefiniteGuard`) are symmetric but not positive semi-definite:
products, diagonals, indexing, batch operations and eigendecompositions are exact, while everything that needs a
PSD matrix raises :class:`~gprf.exceptions.IndefiniteKernelError`. The two cases below run linear_operator's checks
on such an operator; each check that needs a PSD matrix is overridden (its docstring says why it does not apply)
to assert that the operator refuses it with the error naming the operation, instead of being skipped::

    import unittest

    from gprf.testing import IndefiniteLinearOperatorTestCase


    class TestMyIndefiniteOperator(IndefiniteLinearOperatorTestCase, unittest.TestCase):
        seed = 0

        def create_linear_op(self): ...

        def evaluate_linear_op(self, linear_op): ...
"""

from __future__ import annotations

import linear_operator
import pytest
import torch
from linear_operator.test.linear_operator_test_case import LinearOperatorTestCase

from gprf.exceptions import IndefiniteKernelError

_CHOLESKY = "A Cholesky factorisation"
_LOGDET = "The log-determinant"
_ROOT = r"A root decomposition \(sampling\)"
_INVERSE_ROOT = r"A root of the inverse"
_SQRT_INV = "sqrt_inv_matmul"
_SOLVE_ALONE = "Solving with the kernel matrix alone"


def indefinite_factors(batch_shape=()) -> tuple[torch.Tensor, torch.Tensor]:
    r"""``(Q, lambda)``: a random orthonormal basis ``(*batch_shape, 5, 5)`` (from torch's global RNG, which the case's
    ``seed`` seeds) and the eigenvalues :math:`(-2, -1, 1.5, 3, 4)`. :math:`Q\,\mathrm{diag}(\lambda)\,Q^\top` is
    indefinite yet well conditioned, and stays so plus a noise of 0.5 (eigenvalues :math:`-1.5, \dots, 4.5`), so the
    checks' float32 solves stay accurate; ``Q * lambda.abs().sqrt()`` with signature ``lambda.sign()`` are its signed
    roots."""
    basis = torch.linalg.qr(torch.randn(*batch_shape, 5, 5)).Q
    return basis, torch.tensor([-2.0, -1.0, 1.5, 3.0, 4.0])


def _refused(match: str):
    """``pytest.raises`` for the indefinite-kernel error of the operation ``match`` names."""
    return pytest.raises(IndefiniteKernelError, match=match)


class IndefiniteLinearOperatorTestCase(LinearOperatorTestCase):
    """``LinearOperatorTestCase`` for an indefinite kernel matrix without noise: no solves either (the matrix alone
    is usually singular, e.g. :math:`AA^\\top - BB^\\top` of low rank; add a noise diagonal to solve)."""

    # Diagonalizations are exact eigendecompositions (Lanczos would drop the negative eigenvalues).
    should_call_lanczos_diagonalization = False

    def _ensure_symmetric_grad(self, grad):
        """The gradient of the dense reference as it is, not symmetrised: the representations of these operators are
        either two separate roots (whose partial gradients are those of the unsymmetrised matrix gradient) or the
        matrix entries themselves, whose gradient through an LU solve is not symmetrised either (the two agree for
        every symmetric parametrisation of the matrix, as a kernel's is)."""
        return grad

    def _rhs(self, linear_op, columns: int = 3) -> torch.Tensor:
        return torch.randn(*linear_op.batch_shape, linear_op.size(-1), columns)

    def test_cholesky(self):
        """A Cholesky factor needs a PSD matrix: refused."""
        with _refused(_CHOLESKY):
            super().test_cholesky()

    def test_logdet(self):
        """The log-determinant is the marginal likelihood's, which an indefinite kernel has none of: refused."""
        with _refused(_LOGDET):
            super().test_logdet()

    def _assert_log_determinant_refused(self):
        linear_op = self.create_linear_op()
        with _refused(_LOGDET):
            linear_op.inv_quad_logdet(self._rhs(linear_op), logdet=True)

    def test_inv_quad_logdet(self):
        """The log-determinant is refused (see :meth:`test_logdet`); the quadratic term alone is checked by the
        solves."""
        self._assert_log_determinant_refused()

    def test_inv_quad_logdet_no_reduce(self):
        """See :meth:`test_inv_quad_logdet`."""
        self._assert_log_determinant_refused()

    def test_inv_quad_logdet_no_reduce_cholesky(self):
        """See :meth:`test_inv_quad_logdet`."""
        self._assert_log_determinant_refused()

    def test_root_decomposition(self, cholesky=False):
        """A root :math:`LL^\\top = K` (sampling) exists only for PSD matrices: refused."""
        with _refused(_ROOT):
            super().test_root_decomposition(cholesky=cholesky)

    def test_root_decomposition_cholesky(self):
        """See :meth:`test_root_decomposition`."""
        self.test_root_decomposition(cholesky=True)

    def test_root_inv_decomposition(self):
        """A root of the inverse (posterior covariances) needs a PSD matrix: refused."""
        with _refused(_INVERSE_ROOT):
            super().test_root_inv_decomposition()

    def _assert_sqrt_inv_matmul_refused(self, with_lhs: bool):
        linear_op = self.create_linear_op()
        rhs = self._rhs(linear_op)
        lhs = torch.randn(*linear_op.batch_shape, 2, linear_op.size(-1)) if with_lhs else None
        with _refused(_SQRT_INV):
            linear_operator.sqrt_inv_matmul(linear_op, rhs, lhs)

    def test_sqrt_inv_matmul(self):
        """:math:`K^{-1/2}` needs a PSD matrix: refused (batched operators too, which linear_operator's check
        skips)."""
        self._assert_sqrt_inv_matmul_refused(with_lhs=True)

    def test_sqrt_inv_matmul_no_lhs(self):
        """See :meth:`test_sqrt_inv_matmul`."""
        self._assert_sqrt_inv_matmul_refused(with_lhs=False)

    def test_add_low_rank(self):
        """linear_operator keeps a root decomposition of the sum (a PSD operation): refused."""
        with _refused(_ROOT):
            super().test_add_low_rank()

    def test_cat_rows(self):
        """Bordering the matrix updates its root and inverse root (PSD operations): refused. linear_operator's check
        logs the error and goes on, so the refusal is asserted here directly."""
        linear_op = self.create_linear_op()
        new_rows = 1e-4 * torch.randn(*linear_op.shape[:-2], 1, linear_op.shape[-1])
        new_point = torch.rand(*linear_op.shape[:-2], 1, 1)
        with _refused(_ROOT):
            linear_op.cat_rows(new_rows, new_point)

    def test_prod(self):
        """linear_operator's check, and the product over a batch dimension (an indefinite matrix in general) still
        refuses PSD operations."""
        super().test_prod()
        linear_op = self.create_linear_op()
        if linear_op.dim() > 2:
            with _refused(_CHOLESKY):
                torch.linalg.cholesky(torch.prod(linear_op, -3))

    def test_structure_preserving_operations_keep_the_guard(self):
        """Transposes, batch reshaping, square slices and scaling give operators that still refuse PSD operations
        (a plain linear_operator result would take a Cholesky factor of an indefinite matrix)."""
        linear_op = self.create_linear_op()
        results = {
            "transpose": linear_op.mT,
            "unsqueeze": linear_op.unsqueeze(0),
            "expand": linear_op.expand(2, *linear_op.shape),
            "square slice": linear_op[..., 1:4, 1:4],
            "scale": linear_op * 2.0,
        }
        if linear_op.dim() > 2:
            results["batch member"] = linear_op[0]
        if linear_op.dim() > 3:
            results["permute"] = linear_op.permute(1, 0, -2, -1)
        for name, result in results.items():
            try:
                torch.linalg.cholesky(result)
            except IndefiniteKernelError as error:
                assert _CHOLESKY in str(error), error
                continue
            except Exception as error:
                raise AssertionError(f"{name} lost the guard: {type(result).__name__} raised {error!r}") from error
            raise AssertionError(f"{name} lost the guard: {type(result).__name__} factored an indefinite matrix")

    def _assert_solve_refused(self, with_lhs: bool = False, vector: bool = False):
        linear_op = self.create_linear_op()
        rhs = torch.randn(linear_op.size(-1)) if vector else self._rhs(linear_op)
        lhs = torch.randn(*linear_op.batch_shape, 4, linear_op.size(-1)) if with_lhs else None
        with _refused(_SOLVE_ALONE):
            linear_operator.solve(linear_op, rhs, lhs)

    def test_solve_vector(self, cholesky=False):
        """Solving with the kernel matrix alone is refused (it is usually singular; a noise diagonal makes the ridge
        system, which :class:`IndefiniteAddedDiagLinearOperatorTestCase` solves)."""
        self._assert_solve_refused(vector=True)

    def test_solve_vector_with_left(self, cholesky=False):
        """See :meth:`test_solve_vector`."""
        self._assert_solve_refused(with_lhs=True, vector=True)

    def test_solve_vector_with_left_cholesky(self):
        """See :meth:`test_solve_vector`."""
        self._assert_solve_refused(with_lhs=True)

    def test_solve_matrix(self, cholesky=False):
        """See :meth:`test_solve_vector`."""
        self._assert_solve_refused()

    def test_solve_matrix_cholesky(self):
        """See :meth:`test_solve_vector`."""
        self._assert_solve_refused()

    def test_solve_matrix_with_left(self):
        """See :meth:`test_solve_vector`."""
        self._assert_solve_refused(with_lhs=True)

    def test_solve_matrix_broadcast(self):
        """See :meth:`test_solve_vector`."""
        self._assert_solve_refused()


class IndefiniteAddedDiagLinearOperatorTestCase(IndefiniteLinearOperatorTestCase):
    """``LinearOperatorTestCase`` for an indefinite kernel matrix plus noise: the ridge system is solved (by a direct
    factorisation, not by conjugate gradients, which need a PSD matrix); the PSD operations stay refused."""

    should_call_cg = False

    test_solve_vector = LinearOperatorTestCase.test_solve_vector
    test_solve_vector_with_left = LinearOperatorTestCase.test_solve_vector_with_left
    test_solve_vector_with_left_cholesky = LinearOperatorTestCase.test_solve_vector_with_left_cholesky
    test_solve_matrix = LinearOperatorTestCase.test_solve_matrix
    test_solve_matrix_cholesky = LinearOperatorTestCase.test_solve_matrix_cholesky
    test_solve_matrix_with_left = LinearOperatorTestCase.test_solve_matrix_with_left
    test_solve_matrix_broadcast = LinearOperatorTestCase.test_solve_matrix_broadcast
