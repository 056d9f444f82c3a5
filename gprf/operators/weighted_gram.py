r"""The weighted Gram matrix :math:`R^\top\mathrm{diag}(1/\sigma^2)R` with a one-GEMM backward."""

from __future__ import annotations

import torch
from torch import Tensor


class _WeightedGram(torch.autograd.Function):
    @staticmethod
    def forward(ctx, root: Tensor, noise: Tensor) -> Tensor:
        scaled = root / noise.unsqueeze(-1)
        ctx.save_for_backward(root, noise)
        return scaled.mT @ root

    @staticmethod
    def backward(ctx, grad_gram: Tensor) -> tuple[Tensor | None, Tensor | None]:
        root, noise = ctx.saved_tensors
        # With G = sum_i r_i^T r_i / s_i and P = R (dG + dG^T): dR = P / s, ds_i = -(p_i . r_i) / (2 s_i^2).
        projected = root @ (grad_gram + grad_gram.mT)
        grad_root = projected / noise.unsqueeze(-1) if ctx.needs_input_grad[0] else None
        grad_noise = None
        if ctx.needs_input_grad[1]:
            grad_noise = -0.5 * (projected * root).sum(-1) / noise.square()
        return grad_root, grad_noise


def weighted_gram(root: Tensor, noise: Tensor) -> Tensor:
    r""":math:`G = R^\top\mathrm{diag}(\sigma^2)^{-1}R` for ``root`` ``(..., N, F)`` and ``noise`` ``(..., N)``.

    Autograd through ``scaled.mT @ root`` costs two :math:`NF^2` products in the backward pass (one per
    operand); using the symmetry of :math:`G`, one product :math:`P = R(\bar G + \bar G^\top)` gives both
    the root and the noise gradients, so forward plus backward cost :math:`2NF^2` instead of :math:`3NF^2`.
    """
    batch_shape = torch.broadcast_shapes(root.shape[:-2], noise.shape[:-1])
    root = root.expand(*batch_shape, *root.shape[-2:])
    noise = noise.expand(*batch_shape, noise.size(-1))
    return _WeightedGram.apply(root, noise)
