r"""How many iterations linear_operator's conjugate gradients need: the measure of a preconditioner."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import torch
from linear_operator.utils.linear_cg import linear_cg
from linear_operator.utils.warnings import NumericalWarning
from torch import Tensor


def cg_iterations(
    matmul: Callable[[Tensor], Tensor],
    rhs: Tensor,
    preconditioner: Callable[[Tensor], Tensor] | None = None,
    tolerances: Sequence[float] = (1e-2,),
    max_iter: int = 1000,
) -> dict[float, int | None]:
    r"""``{tolerance: iterations}`` of linear_operator's ``linear_cg`` on :math:`Ax = b` (``matmul`` applies
    :math:`A`, ``rhs`` is :math:`b` ``(..., N, k)``): the first iteration whose relative residual
    :math:`\lVert r_k\rVert/\lVert b\rVert` (averaged over the columns, as ``linear_cg`` measures it) is below each
    tolerance, or ``None`` when that takes more than ``max_iter`` iterations.

    ``preconditioner`` applies :math:`P^{-1}` (``None``: none). The residuals are read from the ones ``linear_cg``
    hands its preconditioner at every iteration (iteration 0 is the initial residual), so the count is not the
    iteration where ``linear_cg`` itself stops, which waits for at least 10 iterations. Relative residuals of about
    :math:`10^{-5}` and below are out of reach: ``linear_cg`` stops updating a column whose curvature
    :math:`p^\top Ap` falls below :math:`10^{-10}`.
    """
    if not tolerances or any(not 0 < tol < 1 for tol in tolerances):
        raise ValueError(f"tolerances must be numbers in (0, 1), got {tolerances!r}.")
    solve = torch.clone if preconditioner is None else preconditioner
    residual_norms: list[Tensor] = []

    def recording(residual: Tensor) -> Tensor:
        residual_norms.append(residual.norm(dim=-2).mean())
        return solve(residual)

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", NumericalWarning)  # not converging within max_iter is reported as None
        linear_cg(
            matmul, rhs, tolerance=min(tolerances) / 2, max_iter=max_iter, max_tridiag_iter=0, preconditioner=recording
        )
    norms = torch.stack(residual_norms)
    counts = {}
    for tol in tolerances:
        below = torch.nonzero(norms < tol)
        counts[tol] = int(below[0]) if below.numel() else None
    return counts
