r"""The indefinite kernel matrix :math:`L\,\mathrm{diag}(\varsigma)\,R^\top` of signed random features."""

from __future__ import annotations

import torch
from linear_operator.operators import DenseLinearOperator, DiagLinearOperator, LinearOperator
from torch import Tensor

from gprf.linalg.indefinite_dense_operator import IndefiniteDenseLinearOperator
from gprf.linalg.indefinite_guard import IndefiniteGuard, diagonal_operator
from gprf.linalg.signed_root_added_diag_operator import SignedRootAddedDiagLinearOperator


class SignedRootLinearOperator(IndefiniteGuard, LinearOperator):
    r""":math:`K = L\,\mathrm{diag}(\varsigma)\,R^\top` with real roots :math:`L, R` (``..., n, r``) and a fixed
    signature :math:`\varsigma\in\{\pm1\}^r`; for signed random features :math:`L = R = [A, B]`,
    :math:`\varsigma = (1,\dots,1,-1,\dots,-1)`, i.e. :math:`K = AA^\top - BB^\top`.

    Adding a noise diagonal gives :class:`SignedRootAddedDiagLinearOperator`, whose solves cost :math:`O(nr^2)`.
    Constants (a ``ScaleKernel`` amplitude) scale the left root, which keeps the signature fixed.
    """

    def __init__(self, left: Tensor, right: Tensor, signature: Tensor) -> None:
        batch_shape = torch.broadcast_shapes(left.shape[:-2], right.shape[:-2])
        # Only when needed: linear_operator rebuilds the operator from its (already expanded) representation in
        # backward passes, and a new view of a representation made to require gradients after construction
        # (``detach().requires_grad_()``) would not pass them on.
        if left.shape[:-2] != batch_shape:
            left = left.expand(*batch_shape, *left.shape[-2:])
        if right.shape[:-2] != batch_shape:
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
        left = DenseLinearOperator(self.left)._getitem(row_index, slice(None), *batch_indices).to_dense()
        right = DenseLinearOperator(self.right)._getitem(col_index, slice(None), *batch_indices).to_dense()
        return SignedRootLinearOperator(left, right, self.signature)

    def _get_indices(self, row_index: Tensor, col_index: Tensor, *batch_indices: Tensor) -> Tensor:
        left = self.left[(*batch_indices, row_index)]
        right = self.right[(*batch_indices, col_index)]
        return (left * right * self.signature).sum(-1)

    def _prod_batch(self, dim: int) -> IndefiniteDenseLinearOperator:
        # The elementwise product over a batch dimension, formed densely and still guarded: linear_operator's default
        # multiplies root decompositions, which an indefinite matrix has none of.
        return IndefiniteDenseLinearOperator(self.to_dense().prod(dim))

    def _mul_constant(self, other: Tensor) -> SignedRootLinearOperator:
        constant = torch.as_tensor(other, dtype=self.left.dtype, device=self.left.device)
        return SignedRootLinearOperator(self.left * constant.unsqueeze(-1).unsqueeze(-1), self.right, self.signature)

    def add_diagonal(self, diag: Tensor) -> SignedRootAddedDiagLinearOperator:
        return SignedRootAddedDiagLinearOperator(self, diagonal_operator(self, diag))

    def add_jitter(self, jitter_val: float = 1e-3) -> SignedRootAddedDiagLinearOperator:
        return self.add_diagonal(torch.tensor(jitter_val, dtype=self.dtype, device=self.device))

    def __add__(self, other):
        if isinstance(other, DiagLinearOperator):
            return SignedRootAddedDiagLinearOperator(self, other)
        return super().__add__(other)
