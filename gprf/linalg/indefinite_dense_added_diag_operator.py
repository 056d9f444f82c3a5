r"""A dense indefinite kernel matrix plus noise: LU solves in the factor dtype, no PSD operations."""

from __future__ import annotations

import torch
from linear_operator.operators import AddedDiagLinearOperator
from torch import Tensor

from gprf.exceptions import IndefiniteKernelError
from gprf.linalg.indefinite_guard import IndefiniteGuard
from gprf.settings import factor_dtype


class IndefiniteDenseAddedDiagLinearOperator(IndefiniteGuard, AddedDiagLinearOperator):
    """Dense indefinite matrix plus noise: LU solves in the factor dtype, no PSD operations."""

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
