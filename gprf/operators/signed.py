r"""LinearOperators for indefinite kernel matrices: usable for kernel ridge regression, never as covariances.

An indefinite kernel matrix :math:`\hat K` (e.g. :math:`AA^\top - BB^\top` from signed random features) plus a
noise diagonal :math:`\Sigma` is usually invertible, so the kernel-ridge-regression / posterior-mean system
:math:`(\hat K + \Sigma)\alpha = y` is well posed. Everything that needs a positive semi-definite covariance —
Cholesky factors, log-determinants (the marginal likelihood), root decompositions, sampling, posterior variances —
raises :class:`~gprf.exceptions.IndefiniteKernelError` here instead of returning NaN or a silently wrong result.
"""

from __future__ import annotations

import torch
from linear_operator.operators import AddedDiagLinearOperator, DenseLinearOperator, DiagLinearOperator, LinearOperator
from linear_operator.utils.getitem import _noop_index
from torch import Tensor

from gprf.exceptions import IndefiniteKernelError

_SOLVE_DTYPE = torch.float64


def indefinite_error(operation: str) -> IndefiniteKernelError:
    return IndefiniteKernelError(
        f"{operation} needs a positive semi-definite covariance, but this kernel matrix is indefinite (a signed "
        "random-feature kernel or an indefinite target such as DeltaGaussianKernel). Supported: the posterior mean / "
        "kernel ridge regression (model(x).mean, gprf.kernels.krein_ridge_mean). For a GP with marginal likelihood, "
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

    def inv_quad(self, inv_quad_rhs: Tensor, reduce_inv_quad: bool = True) -> Tensor:
        rhs = inv_quad_rhs.unsqueeze(-1) if inv_quad_rhs.dim() == 1 else inv_quad_rhs
        result = (rhs * self.solve(rhs)).sum(-2)
        return result.sum(-1) if reduce_inv_quad else result


def _diagonal_operator(operator: LinearOperator, diag: Tensor) -> DiagLinearOperator:
    """``add_diagonal``'s argument (scalar, trailing-1 or per-row) as a DiagLinearOperator of the right shape."""
    return DiagLinearOperator(diag.expand(*operator.shape[:-1]))


class SignedRootLinearOperator(IndefiniteGuard, LinearOperator):
    r""":math:`K = L\,\mathrm{diag}(\varsigma)\,R^\top` with real roots :math:`L, R` (``..., n, r``) and a fixed
    signature :math:`\varsigma\in\{\pm1\}^r`; for signed random features :math:`L = R = [A, B]`,
    :math:`\varsigma = (1,\dots,1,-1,\dots,-1)`, i.e. :math:`K = AA^\top - BB^\top`.

    Adding a noise diagonal gives :class:`SignedRootAddedDiagLinearOperator`, whose solves cost :math:`O(nr^2)`.
    Constants (a ``ScaleKernel`` amplitude) scale the left root, which keeps the signature fixed.
    """

    def __init__(self, left: Tensor, right: Tensor, signature: Tensor) -> None:
        batch_shape = torch.broadcast_shapes(left.shape[:-2], right.shape[:-2])
        left = left.expand(*batch_shape, *left.shape[-2:])
        right = right.expand(*batch_shape, *right.shape[-2:])
        super().__init__(left, right, signature)
        self.left, self.right, self.signature = left, right, signature

    def _size(self) -> torch.Size:
        return torch.Size((*self.left.shape[:-1], self.right.size(-2)))

    def _matmul(self, rhs: Tensor) -> Tensor:
        return self.left @ (self.signature.unsqueeze(-1) * (self.right.mT @ rhs))

    def _transpose_nonbatch(self) -> SignedRootLinearOperator:
        return SignedRootLinearOperator(self.right, self.left, self.signature)

    def to_dense(self) -> Tensor:
        return (self.left * self.signature) @ self.right.mT

    def _diagonal(self) -> Tensor:
        return (self.left * self.right * self.signature).sum(-1)

    def _expand_batch(self, batch_shape: torch.Size) -> SignedRootLinearOperator:
        return SignedRootLinearOperator(
            self.left.expand(*batch_shape, *self.left.shape[-2:]),
            self.right.expand(*batch_shape, *self.right.shape[-2:]),
            self.signature,
        )

    def _unsqueeze_batch(self, dim: int) -> SignedRootLinearOperator:
        return SignedRootLinearOperator(self.left.unsqueeze(dim), self.right.unsqueeze(dim), self.signature)

    def _permute_batch(self, *dims: int) -> SignedRootLinearOperator:
        order = (*dims, self.left.dim() - 2, self.left.dim() - 1)
        return SignedRootLinearOperator(self.left.permute(*order), self.right.permute(*order), self.signature)

    def _getitem(self, row_index, col_index, *batch_indices) -> SignedRootLinearOperator:
        left = DenseLinearOperator(self.left)._getitem(row_index, _noop_index, *batch_indices).to_dense()
        right = DenseLinearOperator(self.right)._getitem(col_index, _noop_index, *batch_indices).to_dense()
        return SignedRootLinearOperator(left, right, self.signature)

    def _get_indices(self, row_index: Tensor, col_index: Tensor, *batch_indices: Tensor) -> Tensor:
        left = self.left[(*batch_indices, row_index)]
        right = self.right[(*batch_indices, col_index)]
        return (left * right * self.signature).sum(-1)

    def _mul_constant(self, other: Tensor) -> SignedRootLinearOperator:
        constant = torch.as_tensor(other, dtype=self.left.dtype, device=self.left.device)
        return SignedRootLinearOperator(self.left * constant.unsqueeze(-1).unsqueeze(-1), self.right, self.signature)

    def add_diagonal(self, diag: Tensor) -> SignedRootAddedDiagLinearOperator:
        return SignedRootAddedDiagLinearOperator(self, _diagonal_operator(self, diag))

    def add_jitter(self, jitter_val: float = 1e-3) -> SignedRootAddedDiagLinearOperator:
        return self.add_diagonal(torch.tensor(jitter_val, dtype=self.dtype, device=self.device))

    def __add__(self, other):
        if isinstance(other, DiagLinearOperator):
            return SignedRootAddedDiagLinearOperator(self, other)
        return super().__add__(other)


class SignedRootAddedDiagLinearOperator(IndefiniteGuard, AddedDiagLinearOperator):
    r""":math:`L\,\mathrm{diag}(\varsigma)R^\top + \Sigma`, solved through the Woodbury identity in float64:

    .. math::
        (\Sigma + L S R^\top)^{-1} = \Sigma^{-1} - \Sigma^{-1}L\,(I + S R^\top\Sigma^{-1}L)^{-1} S R^\top\Sigma^{-1},

    with the :math:`r\times r` capacitance :math:`I + SR^\top\Sigma^{-1}L` (not symmetric positive definite for
    an indefinite :math:`K`) LU-factored. A singular system raises :class:`~gprf.exceptions.IndefiniteKernelError`
    instead of returning infinities.
    """

    def solve(self, right_tensor: Tensor, left_tensor: Tensor | None = None) -> Tensor:
        operator = self._linear_op
        dtype = right_tensor.dtype
        left, right = operator.left.to(_SOLVE_DTYPE), operator.right.to(_SOLVE_DTYPE)
        signature = operator.signature.to(_SOLVE_DTYPE)
        noise = self._diag_tensor.diagonal(dim1=-2, dim2=-1).to(_SOLVE_DTYPE).unsqueeze(-1)
        rhs = right_tensor.to(_SOLVE_DTYPE)
        vector = rhs.dim() == 1
        if vector:
            rhs = rhs.unsqueeze(-1)
        scaled_left = left / noise
        eye = torch.eye(left.size(-1), dtype=_SOLVE_DTYPE, device=left.device)
        capacitance = eye + signature.unsqueeze(-1) * (right.mT @ scaled_left)
        factors, pivots, info = torch.linalg.lu_factor_ex(capacitance)
        # Numerically singular: an LU pivot within 1e4 * r rounding units of zero, relative to the largest one
        # (a condition number beyond ~1e11, where the solution has at most a few correct digits).
        pivots_abs = factors.diagonal(dim1=-2, dim2=-1).abs()
        threshold = 1e4 * capacitance.size(-1) * torch.finfo(_SOLVE_DTYPE).eps * pivots_abs.amax(-1)
        if bool(((info != 0) | (pivots_abs.amin(-1) <= threshold)).any()):
            raise IndefiniteKernelError(
                "The indefinite kernel matrix plus noise is singular (an eigenvalue of K equals minus the noise); "
                "change the noise level (ridge parameter)."
            )
        projected = signature.unsqueeze(-1) * (right.mT @ (rhs / noise))
        solution = rhs / noise - scaled_left @ torch.linalg.lu_solve(factors, pivots, projected)
        if vector:
            solution = solution.squeeze(-1)
        solution = solution.to(dtype)
        return solution if left_tensor is None else left_tensor @ solution


class IndefiniteDenseLinearOperator(IndefiniteGuard, DenseLinearOperator):
    """A dense indefinite kernel matrix (exact indefinite targets); plus a diagonal it solves by LU."""

    def _mul_constant(self, other: Tensor) -> IndefiniteDenseLinearOperator:
        constant = torch.as_tensor(other, dtype=self.dtype, device=self.device)
        return IndefiniteDenseLinearOperator(self.tensor * constant.unsqueeze(-1).unsqueeze(-1))

    def _getitem(self, row_index, col_index, *batch_indices) -> IndefiniteDenseLinearOperator:
        return IndefiniteDenseLinearOperator(super()._getitem(row_index, col_index, *batch_indices).to_dense())

    def _expand_batch(self, batch_shape: torch.Size) -> IndefiniteDenseLinearOperator:
        return IndefiniteDenseLinearOperator(self.tensor.expand(*batch_shape, *self.matrix_shape))

    def add_diagonal(self, diag: Tensor) -> IndefiniteDenseAddedDiagLinearOperator:
        return IndefiniteDenseAddedDiagLinearOperator(self, _diagonal_operator(self, diag))

    def add_jitter(self, jitter_val: float = 1e-3) -> IndefiniteDenseAddedDiagLinearOperator:
        return self.add_diagonal(torch.tensor(jitter_val, dtype=self.dtype, device=self.device))

    def __add__(self, other):
        if isinstance(other, DiagLinearOperator):
            return IndefiniteDenseAddedDiagLinearOperator(self, other)
        return super().__add__(other)


class IndefiniteDenseAddedDiagLinearOperator(IndefiniteGuard, AddedDiagLinearOperator):
    """Dense indefinite matrix plus noise: LU solves in float64, no PSD operations."""

    def solve(self, right_tensor: Tensor, left_tensor: Tensor | None = None) -> Tensor:
        matrix = self.to_dense().to(_SOLVE_DTYPE)
        rhs = right_tensor.to(_SOLVE_DTYPE)
        vector = rhs.dim() == 1
        solution, info = torch.linalg.solve_ex(matrix, rhs.unsqueeze(-1) if vector else rhs)
        if bool((info != 0).any()):
            raise IndefiniteKernelError(
                "The indefinite kernel matrix plus noise is singular; change the noise level (ridge parameter)."
            )
        solution = (solution.squeeze(-1) if vector else solution).to(right_tensor.dtype)
        return solution if left_tensor is None else left_tensor @ solution


class IndefinitePosteriorCovariance(IndefiniteGuard, LinearOperator):
    r"""Placeholder for the posterior covariance of an indefinite-kernel model: shapes only, any use raises.

    :math:`k_{**} - k_{*}^\top(\hat K + \Sigma)^{-1}k_*` is not a covariance when :math:`\hat K` is indefinite (it can
    be negative), so the predictive distribution of such a model carries its mean only.
    """

    def __init__(self, reference: Tensor) -> None:
        super().__init__(reference)
        self.reference = reference  # (..., m): gives batch shape, size, dtype and device

    def _size(self) -> torch.Size:
        return torch.Size((*self.reference.shape, self.reference.size(-1)))

    def _transpose_nonbatch(self) -> IndefinitePosteriorCovariance:
        return self

    def _expand_batch(self, batch_shape: torch.Size) -> IndefinitePosteriorCovariance:
        return IndefinitePosteriorCovariance(self.reference.expand(*batch_shape, self.reference.size(-1)))

    def _matmul(self, rhs: Tensor) -> Tensor:
        raise indefinite_error("A posterior covariance (variances, sampling, confidence regions)")

    def _diagonal(self) -> Tensor:
        raise indefinite_error("A posterior variance")

    def to_dense(self) -> Tensor:
        raise indefinite_error("A posterior covariance")

    def _get_indices(self, *args) -> Tensor:
        raise indefinite_error("A posterior covariance")
