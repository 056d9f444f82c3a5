r"""LinearOperators for indefinite kernel matrices: usable for kernel ridge regression, never as covariances.

An indefinite kernel matrix :math:`\hat K` (e.g. :math:`AA^\top - BB^\top` from signed random features) plus a
noise diagonal :math:`\Sigma` is usually invertible, so the kernel-ridge-regression / posterior-mean system
:math:`(\hat K + \Sigma)\alpha = y` is well posed. Everything that needs a positive semi-definite covariance —
Cholesky factors, log-determinants (the marginal likelihood), root decompositions, sampling, posterior variances —
raises :class:`~gprf.exceptions.IndefiniteKernelError` here instead of returning NaN or a silently wrong result.
"""

from __future__ import annotations

import torch
from linear_operator.operators import DenseLinearOperator, DiagLinearOperator, LinearOperator
from torch import Tensor

from gprf.exceptions import IndefiniteKernelError
from gprf.settings import factor_dtype


def indefinite_error(operation: str) -> IndefiniteKernelError:
    return IndefiniteKernelError(
        f"{operation} needs a positive semi-definite covariance, but this kernel matrix is indefinite (a signed "
        "random-feature kernel or an indefinite target such as DeltaGaussianKernel). Supported: the posterior mean / "
        "kernel ridge regression (model(x).mean, gprf.prediction.krein_ridge_mean). For a GP with marginal likelihood, "
        "variances and sampling use the PSD part, kernel.psd_part()."
    )


class IndefiniteGuard:
    """Mixin: every operation that assumes a PSD matrix raises :class:`~gprf.exceptions.IndefiniteKernelError`."""

    def cholesky(self, *args, **kwargs):
        raise indefinite_error("A Cholesky factorisation")

    def _cholesky(self, *args, **kwargs):
        raise indefinite_error("A Cholesky factorisation")

    def root_decomposition(self, *args, **kwargs):
        raise indefinite_error("A root decomposition (sampling)")

    def root_inv_decomposition(self, *args, **kwargs):
        raise indefinite_error("A root of the inverse (posterior covariance)")

    def zero_mean_mvn_samples(self, *args, **kwargs):
        raise indefinite_error("Sampling from a Gaussian")

    def sqrt_inv_matmul(self, *args, **kwargs):
        raise indefinite_error("sqrt_inv_matmul")

    def inv_quad_logdet(self, inv_quad_rhs: Tensor | None = None, logdet: bool = False, reduce_inv_quad: bool = True):
        if logdet:
            raise indefinite_error("The log-determinant (marginal likelihood)")
        if inv_quad_rhs is None:
            return None, None
        return self.inv_quad(inv_quad_rhs, reduce_inv_quad=reduce_inv_quad), None

    def logdet(self):
        raise indefinite_error("The log-determinant (marginal likelihood)")

    def solve(self, right_tensor: Tensor, left_tensor: Tensor | None = None) -> Tensor:
        raise indefinite_error("Solving with the kernel matrix alone (add a noise diagonal for ridge regression)")

    def _symeig(self, eigenvectors: bool = False, return_evals_as_lazy: bool | None = False):
        """The eigenvalues with their signs, in :class:`gprf.settings.factor_dtype` (linear_operator's default
        clips negative eigenvalues to zero, as for a covariance; its ``eigh``, ``eigvalsh`` and ``svd`` read this)."""
        evals, evecs = torch.linalg.eigh(self.to_dense().to(factor_dtype.value()))
        return evals.to(self.dtype), DenseLinearOperator(evecs.to(self.dtype)) if eigenvectors else None

    def diagonalization(self, method: str | None = None):
        """The exact eigendecomposition (``_symeig``, above) whatever ``method`` says: Lanczos's tridiagonal step in
        linear_operator masks negative eigenvalues (it assumes a PSD matrix)."""
        return self._symeig(eigenvectors=True)

    def inv_quad(self, inv_quad_rhs: Tensor, reduce_inv_quad: bool = True) -> Tensor:
        rhs = inv_quad_rhs.unsqueeze(-1) if inv_quad_rhs.dim() == 1 else inv_quad_rhs
        result = (rhs * self.solve(rhs)).sum(-2)
        return result.sum(-1) if reduce_inv_quad else result


class IndefiniteAddedDiagGuard(IndefiniteGuard):
    """Mixin for an indefinite matrix plus a noise diagonal (before ``AddedDiagLinearOperator`` in the bases):
    indexing and batch products stay guarded. A subclass names the guarded dense operator of its blocks."""

    def _guarded_dense(self, dense: Tensor) -> IndefiniteGuard:
        """``dense``, a block or product of this sum, as a guarded operator."""
        raise NotImplementedError

    def _getitem(self, row_index, col_index, *batch_indices) -> IndefiniteGuard:
        same_rows = isinstance(row_index, slice) and row_index == col_index
        if same_rows and not any(torch.is_tensor(index) for index in batch_indices):
            # Rows of the symmetric system (a batch member, a block of points): still the matrix plus its noise, where
            # linear_operator's sum would give an unguarded SumLinearOperator.
            noise = self._diag_tensor.diagonal(dim1=-2, dim2=-1)[(*batch_indices, row_index)]
            matrix = self._linear_op._getitem(row_index, col_index, *batch_indices)
            return type(self)(matrix, DiagLinearOperator(noise))
        # Another block: dense, and still guarded.
        return self._guarded_dense(super()._getitem(row_index, col_index, *batch_indices).to_dense())

    def _prod_batch(self, dim: int) -> IndefiniteGuard:
        # The elementwise product over a batch dimension, formed densely and still guarded: linear_operator's default
        # multiplies root decompositions, which an indefinite matrix has none of.
        return self._guarded_dense(self.to_dense().prod(dim))


def diagonal_operator(operator: LinearOperator, diag: Tensor) -> DiagLinearOperator:
    """``add_diagonal``'s argument (scalar, trailing-1 or per-row) as a DiagLinearOperator of the right shape."""
    return DiagLinearOperator(diag.expand(*operator.shape[:-1]))
