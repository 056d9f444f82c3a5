r"""A dense indefinite kernel matrix plus noise: LU solves in the factor dtype, no PSD operations."""

from __future__ import annotations

import torch
from linear_operator.operators import AddedDiagLinearOperator
from torch import Tensor

from gprf.exceptions import IndefiniteKernelError
from gprf.linalg.indefinite_guard import IndefiniteAddedDiagGuard, IndefiniteGuard
from gprf.settings import factor_dtype


class IndefiniteDenseAddedDiagLinearOperator(IndefiniteAddedDiagGuard, AddedDiagLinearOperator):
    """Dense indefinite matrix plus noise: LU solves in the factor dtype, no PSD operations."""

    def _guarded_dense(self, dense: Tensor) -> IndefiniteGuard:
        # Guarded like the matrix this sum was built from (an IndefiniteDenseLinearOperator, whose module imports
        # this one).
        return type(self._linear_op)(dense)

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
