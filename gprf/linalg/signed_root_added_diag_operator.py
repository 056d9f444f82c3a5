r"""A signed-root kernel matrix plus noise: Woodbury solves in the factor dtype, no PSD operations."""

from __future__ import annotations

import torch
from linear_operator.operators import AddedDiagLinearOperator
from torch import Tensor

from gprf.exceptions import IndefiniteKernelError
from gprf.linalg.indefinite_dense_operator import IndefiniteDenseLinearOperator
from gprf.linalg.indefinite_guard import IndefiniteAddedDiagGuard
from gprf.settings import factor_dtype


class SignedRootAddedDiagLinearOperator(IndefiniteAddedDiagGuard, AddedDiagLinearOperator):
    r""":math:`L\,\mathrm{diag}(\varsigma)R^\top + \Sigma`, solved through the Woodbury identity in the factor dtype
    (:class:`gprf.settings.factor_dtype`):

    .. math::
        (\Sigma + L S R^\top)^{-1} = \Sigma^{-1} - \Sigma^{-1}L\,(I + S R^\top\Sigma^{-1}L)^{-1} S R^\top\Sigma^{-1},

    with the :math:`r\times r` capacitance :math:`I + SR^\top\Sigma^{-1}L` (not symmetric positive definite for
    an indefinite :math:`K`) LU-factored. A singular system raises :class:`~gprf.exceptions.IndefiniteKernelError`
    instead of returning infinities.
    """

    def _guarded_dense(self, dense: Tensor) -> IndefiniteDenseLinearOperator:
        return IndefiniteDenseLinearOperator(dense)

    def solve(self, right_tensor: Tensor, left_tensor: Tensor | None = None) -> Tensor:
        dtype = factor_dtype.value()
        operator = self._linear_op
        left, right = operator.left.to(dtype), operator.right.to(dtype)
        signature = operator.signature.to(dtype)
        noise = self._diag_tensor.diagonal(dim1=-2, dim2=-1).to(dtype).unsqueeze(-1)
        rhs = right_tensor.to(dtype)
        vector = rhs.dim() == 1
        if vector:
            rhs = rhs.unsqueeze(-1)
        scaled_left = left / noise
        eye = torch.eye(left.size(-1), dtype=dtype, device=left.device)
        capacitance = eye + signature.unsqueeze(-1) * (right.mT @ scaled_left)
        factors, pivots, info = torch.linalg.lu_factor_ex(capacitance)
        # Numerically singular: an LU pivot within 1e4 * r rounding units of zero, relative to the largest one
        # (a condition number beyond ~1e11, where the solution has at most a few correct digits).
        pivots_abs = factors.diagonal(dim1=-2, dim2=-1).abs()
        threshold = 1e4 * capacitance.size(-1) * torch.finfo(dtype).eps * pivots_abs.amax(-1)
        if bool(((info != 0) | (pivots_abs.amin(-1) <= threshold)).any()):
            raise IndefiniteKernelError(
                "The indefinite kernel matrix plus noise is singular (an eigenvalue of K equals minus the noise); "
                "change the noise level (ridge parameter)."
            )
        projected = signature.unsqueeze(-1) * (right.mT @ (rhs / noise))
        solution = rhs / noise - scaled_left @ torch.linalg.lu_solve(factors, pivots, projected)
        if vector:
            solution = solution.squeeze(-1)
        solution = solution.to(right_tensor.dtype)
        return solution if left_tensor is None else left_tensor @ solution
