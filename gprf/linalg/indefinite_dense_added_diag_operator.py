r"""A dense indefinite kernel matrix plus noise: LU solves in the factor dtype, no PSD operations."""

from __future__ import annotations

import torch
from linear_operator.operators import AddedDiagLinearOperator, DiagLinearOperator
from torch import Tensor

from gprf.exceptions import IndefiniteKernelError
from gprf.linalg.indefinite_guard import IndefiniteGuard
from gprf.settings import factor_dtype


class IndefiniteDenseAddedDiagLinearOperator(IndefiniteGuard, AddedDiagLinearOperator):
    """Dense indefinite matrix plus noise: LU solves in the factor dtype, no PSD operations."""

    def _getitem(self, row_index, col_index, *batch_indices) -> IndefiniteGuard:
        same_rows = isinstance(row_index, slice) and row_index == col_index
        if same_rows and not any(torch.is_tensor(index) for index in batch_indices):
            # Rows of the symmetric system (a batch member, a block of points): still the matrix plus its noise, where
            # linear_operator's sum would give an unguarded SumLinearOperator.
            noise = self._diag_tensor.diagonal(dim1=-2, dim2=-1)[(*batch_indices, row_index)]
            matrix = self._linear_op._getitem(row_index, col_index, *batch_indices)
            return type(self)(matrix, DiagLinearOperator(noise))
        # Another block: dense, and guarded like the matrix this sum was built from.
        return type(self._linear_op)(super()._getitem(row_index, col_index, *batch_indices).to_dense())

    def _prod_batch(self, dim: int) -> IndefiniteGuard:
        # The elementwise product over a batch dimension, formed densely and guarded like the matrix this sum was
        # built from (an IndefiniteDenseLinearOperator, whose module imports this one): linear_operator's default
        # multiplies root decompositions, which an indefinite matrix has none of.
        return type(self._linear_op)(self.to_dense().prod(dim))

    def solve(self, right_tensor: Tensor, left_tensor: Tensor | None = None) -> Tensor:
        dtype = factor_dtype.value()
        matrix = self.to_dense().to(dtype)
        rhs = right_tensor.to(dtype)
        vector = rhs.dim() == 1
        solution, info = torch.linalg.solve_ex(matrix, rhs.unsqueeze(-1) if vector else rhs)
        if bool((info != 0).any()):
            raise IndefiniteKernelError(
                "The indefinite kernel matrix plus noise is singular; change the noise level (ridge parameter)."
            )
        solution = (solution.squeeze(-1) if vector else solution).to(right_tensor.dtype)
        return solution if left_tensor is None else left_tensor @ solution
