r"""A dense indefinite kernel matrix (exact indefinite targets), guarded against PSD operations."""

from __future__ import annotations

import torch
from linear_operator.operators import DenseLinearOperator, DiagLinearOperator
from torch import Tensor

from gprf.linalg.indefinite_dense_added_diag_operator import IndefiniteDenseAddedDiagLinearOperator
from gprf.linalg.indefinite_guard import IndefiniteGuard, diagonal_operator


class IndefiniteDenseLinearOperator(IndefiniteGuard, DenseLinearOperator):
    """A dense indefinite kernel matrix (exact indefinite targets); plus a diagonal it solves by LU."""

    def _mul_constant(self, other: Tensor) -> IndefiniteDenseLinearOperator:
        constant = torch.as_tensor(other, dtype=self.dtype, device=self.device)
        return IndefiniteDenseLinearOperator(self.tensor * constant.unsqueeze(-1).unsqueeze(-1))

    def _getitem(self, row_index, col_index, *batch_indices) -> IndefiniteDenseLinearOperator:
        return IndefiniteDenseLinearOperator(super()._getitem(row_index, col_index, *batch_indices).to_dense())

    def _expand_batch(self, batch_shape: torch.Size) -> IndefiniteDenseLinearOperator:
        return IndefiniteDenseLinearOperator(self.tensor.expand(*batch_shape, *self.matrix_shape))

    def _transpose_nonbatch(self) -> IndefiniteDenseLinearOperator:
        # DenseLinearOperator's transpose is a plain DenseLinearOperator, which would drop the guard.
        return IndefiniteDenseLinearOperator(self.tensor.mT)

    def add_diagonal(self, diag: Tensor) -> IndefiniteDenseAddedDiagLinearOperator:
        return IndefiniteDenseAddedDiagLinearOperator(self, diagonal_operator(self, diag))

    def add_jitter(self, jitter_val: float = 1e-3) -> IndefiniteDenseAddedDiagLinearOperator:
        return self.add_diagonal(torch.tensor(jitter_val, dtype=self.dtype, device=self.device))

    def __add__(self, other):
        if isinstance(other, DiagLinearOperator):
            return IndefiniteDenseAddedDiagLinearOperator(self, other)
        return super().__add__(other)
