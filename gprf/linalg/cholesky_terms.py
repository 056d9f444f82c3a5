r"""The inverse quadratic form and log-determinant of a dense positive definite matrix by one Cholesky factor, with
the closed-form backward pass.

For :math:`A = LL^\top` and right-hand sides :math:`R`, with :math:`\alpha = A^{-1}R`:

.. math::

    q = \operatorname{diag}(R^\top A^{-1} R), \qquad \ell = \log\det A = 2\sum_i \log L_{ii},

    \frac{\partial (g^\top q)}{\partial A} = -\alpha\,\operatorname{diag}(g)\,\alpha^\top, \qquad
    \frac{\partial (g^\top q)}{\partial R} = 2\,\alpha\,\operatorname{diag}(g), \qquad
    \frac{\partial \ell}{\partial A} = A^{-1} = L^{-\top}L^{-1}.

Autograd through the factorisation (what linear_operator's Cholesky route does) differentiates the factor itself:
two triangular solves with :math:`N` right-hand sides and two :math:`N\times N` products in the backward pass. The
closed form needs :math:`A^{-1}` from the factor (LAPACK's ``potri``, one pass of :math:`\tfrac23N^3`): at
:math:`N = 2000`, one CPU thread, float32, 0.17 s for factor and inverse against 0.83 s for the autograd route's
forward and backward.
"""

from __future__ import annotations

import torch
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor


class _CholeskyInvQuadLogdet(torch.autograd.Function):
    """``(matrix (*b, N, N), rhs (*b, N, M), logdet_wanted) -> (q (*b, M), logdet (*b))`` with the closed-form backward
    pass (the log-determinant's term only when ``logdet_wanted``: the caller returns it only then)."""

    @staticmethod
    def forward(ctx, matrix: Tensor, rhs: Tensor, logdet_wanted: bool) -> tuple[Tensor, Tensor]:
        factor = psd_safe_cholesky(matrix)
        solution = torch.cholesky_solve(rhs, factor)
        inv_quad = (rhs * solution).sum(-2)
        logdet = 2 * factor.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        ctx.save_for_backward(factor, solution)
        ctx.logdet_wanted = logdet_wanted
        return inv_quad, logdet

    @staticmethod
    def backward(ctx, grad_inv_quad: Tensor, grad_logdet: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        factor, solution = ctx.saved_tensors
        weighted = solution * grad_inv_quad.unsqueeze(-2)
        grad_matrix = grad_rhs = None
        if ctx.needs_input_grad[0]:
            grad_matrix = -(weighted @ solution.mT)
            if ctx.logdet_wanted:  # A^-1 costs 2N^3/3: only where the log-determinant was asked for
                grad_matrix = grad_matrix + torch.cholesky_inverse(factor) * grad_logdet.unsqueeze(-1).unsqueeze(-1)
        if ctx.needs_input_grad[1]:
            grad_rhs = 2 * weighted
        return grad_matrix, grad_rhs, None


def cholesky_inv_quad_logdet(
    matrix: Tensor, inv_quad_rhs: Tensor | None = None, logdet: bool = False, reduce_inv_quad: bool = True
) -> tuple[Tensor | None, Tensor | None]:
    r"""linear_operator's ``inv_quad_logdet`` of a dense positive definite ``matrix`` ``(*batch, N, N)``: the
    inverse quadratic term of ``inv_quad_rhs`` (``(*batch, N, M)`` or ``(N,)`` for a single matrix; summed over the
    columns when ``reduce_inv_quad``) and :math:`\log\det A` when ``logdet``, by one Cholesky factor (with
    linear_operator's jitter retries) and the closed-form backward pass of the module docstring.

    Terms not asked for are ``None``, as linear_operator's Cholesky route returns them."""
    if inv_quad_rhs is None and not logdet:
        raise RuntimeError("Either `inv_quad_rhs` or `logdet` must be specified.")
    rhs = inv_quad_rhs
    if rhs is None:
        rhs = matrix.new_zeros(*matrix.shape[:-1], 0)
    elif rhs.dim() == 1:
        rhs = rhs.unsqueeze(-1)
    if rhs.shape[:-1] != matrix.shape[:-1]:
        raise RuntimeError(
            f"inv_quad_rhs of shape {tuple(inv_quad_rhs.shape)} does not match the matrix of shape "
            f"{tuple(matrix.shape)}: it needs the shape (*batch, N, M) with the matrix's batch and N."
        )
    inv_quad, log_determinant = _CholeskyInvQuadLogdet.apply(matrix, rhs, bool(logdet))
    if inv_quad_rhs is None:
        inv_quad = None
    elif reduce_inv_quad:
        inv_quad = inv_quad.sum(-1)
    return inv_quad, log_determinant if logdet else None
