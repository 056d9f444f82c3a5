r"""The weighted Gram matrix :math:`R^\top\mathrm{diag}(1/\sigma^2)R` with a one-GEMM backward."""

from __future__ import annotations

import torch
from torch import Tensor

_GRAM_BLOCK = 128


def symmetric_gram(a: Tensor) -> Tensor:
    r""":math:`A^\top A` for ``a`` ``(..., N, F)`` from the upper block triangle only.

    BLAS has no symmetric rank-k update in torch; on the CPU, computing row panels :math:`A_i^\top A_{:, i:}` of
    width 128 and mirroring them costs :math:`(k+1)/(2k)` of the full product for :math:`k` panels (5/8 at
    :math:`F = 512`) while each panel is still a large, efficient GEMM. On a GPU the :math:`k` GEMM launches and
    :math:`2k` mirroring copies cost more than the flops they save (measured on an H200: 34 kernel launches and 66
    copies per row chunk made a chunked Gram launch-bound), so there it is one GEMM.
    """
    num_features = a.size(-1)
    if num_features < 2 * _GRAM_BLOCK or a.device.type != "cpu":
        return a.mT @ a
    out = a.new_empty(*a.shape[:-2], num_features, num_features)
    for start in range(0, num_features, _GRAM_BLOCK):
        stop = min(start + _GRAM_BLOCK, num_features)
        panel = a[..., start:stop].mT @ a[..., start:]
        out[..., start:stop, start:] = panel
        out[..., stop:, start:stop] = panel[..., stop - start :].mT
    return out


class _WeightedGram(torch.autograd.Function):
    @staticmethod
    def forward(ctx, root: Tensor, noise: Tensor) -> Tensor:
        ctx.save_for_backward(root, noise)
        return symmetric_gram(root * noise.rsqrt().unsqueeze(-1))

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


class _ConstantNoiseGram(torch.autograd.Function):
    """:math:`R^\\top R/\\sigma^2` for one noise value per batch member: no :math:`N\\times F` elementwise pass."""

    @staticmethod
    def forward(ctx, root: Tensor, noise: Tensor) -> Tensor:
        gram = symmetric_gram(root) / noise.unsqueeze(-1)
        ctx.save_for_backward(root, noise, gram)
        return gram

    @staticmethod
    def backward(ctx, grad_gram: Tensor) -> tuple[Tensor | None, Tensor | None]:
        root, noise, gram = ctx.saved_tensors
        symmetric = grad_gram + grad_gram.mT
        # dR = R (dG + dG^T) / s with the scalar folded into the F x F factor; ds = -<G, dG> / s.
        grad_root = root @ (symmetric / noise.unsqueeze(-1)) if ctx.needs_input_grad[0] else None
        grad_noise = None
        if ctx.needs_input_grad[1]:
            grad_noise = -(gram * grad_gram).sum((-2, -1)).unsqueeze(-1) / noise
        return grad_root, grad_noise


def weighted_gram(root: Tensor, noise: Tensor) -> Tensor:
    r""":math:`G = R^\top\mathrm{diag}(\sigma^2)^{-1}R` for ``root`` ``(..., N, F)`` and ``noise`` ``(..., N)``.

    Autograd through ``scaled.mT @ root`` costs two :math:`NF^2` products in the backward pass (one per
    operand); using the symmetry of :math:`G`, one product :math:`P = R(\bar G + \bar G^\top)` gives both
    the root and the noise gradients, so forward plus backward cost :math:`2NF^2` instead of :math:`3NF^2`.

    ``noise`` of shape ``(..., 1)`` is one variance per batch member (homoscedastic likelihoods): then the
    division moves onto the :math:`F\times F` result and its gradient is
    :math:`\partial G/\partial\sigma^2 = -G/\sigma^2`, so no :math:`N\times F` temporary is formed
    besides the backward product.
    """
    batch_shape = torch.broadcast_shapes(root.shape[:-2], noise.shape[:-1])
    root = root.expand(*batch_shape, *root.shape[-2:])
    noise = noise.expand(*batch_shape, noise.size(-1))
    if noise.size(-1) == 1 and root.size(-2) != 1:
        return _ConstantNoiseGram.apply(root, noise)
    return _WeightedGram.apply(root, noise)


def _add_outer(base: Tensor, left: Tensor, right_t: Tensor) -> Tensor:
    """``base + left @ right_t`` accumulated in place by BLAS (one pass over ``base``, no temporary)."""
    # An explicit batch size: reshape(-1, ...) is ambiguous for empty operands (e.g. a right-hand side of no columns).
    batch = base.shape[:-2].numel()
    flat = base.reshape(batch, *base.shape[-2:])
    flat.baddbmm_(left.reshape(batch, *left.shape[-2:]), right_t.reshape(batch, *right_t.shape[-2:]))
    return flat.view(base.shape)


class _WeightedGramProjection(torch.autograd.Function):
    @staticmethod
    def forward(ctx, root: Tensor, noise: Tensor, rhs: Tensor) -> tuple[Tensor, Tensor]:
        constant = noise.size(-1) == 1
        if constant:
            gram = symmetric_gram(root) / noise.unsqueeze(-1)
            projection = (root.mT @ rhs) / noise.unsqueeze(-1)
        else:
            gram = symmetric_gram(root * noise.rsqrt().unsqueeze(-1))
            projection = root.mT @ (rhs / noise.unsqueeze(-1))
        ctx.constant = constant
        ctx.save_for_backward(root, noise, rhs, gram, projection)
        return gram, projection

    @staticmethod
    def backward(ctx, grad_gram: Tensor, grad_projection: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        root, noise, rhs, gram, projection = ctx.saved_tensors
        symmetric = grad_gram + grad_gram.mT
        if ctx.constant:
            # Everything scales by 1/s: fold it into the small factors so the N x F gradient is one GEMM.
            inv = 1 / noise.unsqueeze(-1)
            grad_root = _add_outer((root @ (symmetric * inv)).contiguous(), rhs, (grad_projection * inv).mT)
            grad_rhs = root @ (grad_projection * inv)
            grad_noise = -((gram * grad_gram).sum((-2, -1)) + (projection * grad_projection).sum((-2, -1)))
            return grad_root, grad_noise.unsqueeze(-1) / noise, grad_rhs
        # Q = R (dG + dG^T) + y dP^T: dR = Q / s, dy = R dP / s,
        # ds_i = -[q_i . r_i + y_i . (R dP)_i] / (2 s_i^2).
        combined = _add_outer((root @ symmetric).contiguous(), rhs, grad_projection.mT)
        root_grad_projection = root @ grad_projection
        grad_noise = -((combined * root).sum(-1) + (rhs * root_grad_projection).sum(-1)) / (2 * noise.square())
        return combined / noise.unsqueeze(-1), grad_noise, root_grad_projection / noise.unsqueeze(-1)


def weighted_gram_projection(root: Tensor, noise: Tensor, rhs: Tensor) -> tuple[Tensor, Tensor]:
    r""":math:`(R^\top\Sigma^{-1}R,\; R^\top\Sigma^{-1}Y)` with one :math:`N\times F` gradient GEMM.

    The marginal likelihood needs both; through separate autograd nodes the projection's gradient is an
    extra outer product :math:`\Sigma^{-1}Y\,\bar P^\top` (an :math:`N\times F` temporary) added to the
    Gram's. Here the backward accumulates it into the Gram gradient's GEMM in place. ``rhs`` is
    ``(..., N, k)``; ``noise`` as in :func:`weighted_gram` (``(..., N)`` or ``(..., 1)``).
    """
    batch_shape = torch.broadcast_shapes(root.shape[:-2], noise.shape[:-1], rhs.shape[:-2])
    root = root.expand(*batch_shape, *root.shape[-2:])
    noise = noise.expand(*batch_shape, noise.size(-1))
    rhs = rhs.expand(*batch_shape, *rhs.shape[-2:])
    return _WeightedGramProjection.apply(root, noise, rhs)
