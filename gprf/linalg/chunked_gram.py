r"""The weighted Gram matrix and projection summed over row chunks, with the features recomputed in the backward pass.

For a root :math:`R = f(X)` of :math:`N` rows, the marginal likelihood needs

.. math::
    G = \sum_c R_c^\top\Sigma_c^{-1}R_c, \qquad P = \sum_c R_c^\top\Sigma_c^{-1}Y_c

over row chunks :math:`c`. Through autograd, :math:`R` (and every :math:`N\times F` intermediate of :math:`f`) would
be kept for the backward pass, and the backward pass would form an :math:`N\times F` gradient. Here the forward pass
keeps only :math:`X`, :math:`\Sigma`, :math:`Y`, :math:`G` and :math:`P`; the backward pass recomputes each
:math:`R_c = f(X_c)` with gradients enabled and back-propagates the closed-form chunk gradients

.. math::
    \bar R_c = \Sigma_c^{-1}\big(R_c(\bar G + \bar G^\top) + Y_c\bar P^\top\big), \qquad
    \bar Y_c = \Sigma_c^{-1}R_c\bar P, \qquad
    \bar\sigma^2_i = -\frac{r_i^\top(\bar G + \bar G^\top)r_i/2 + y_i^\top\bar P^\top r_i}{\sigma_i^4}

through :math:`f`, so memory is :math:`O(\text{chunk}\cdot F + F^2)` at the price of a second evaluation of
:math:`f` (gradient checkpointing; Griewank & Walther, *Algorithm 799: Revolve*, ACM TOMS 26(1), 2000).

Gradients reach the parameters :math:`\theta` inside :math:`f` because they are explicit inputs of the autograd
node: the backward pass returns :math:`\partial/\partial\theta` from ``torch.autograd.grad`` on the recomputed chunk,
so it composes with ``loss.backward()`` and ``torch.autograd.grad(loss, params)`` alike. (Letting only :math:`X`
carry the lengthscale's graph would miss every other parameter of :math:`f`; calling ``backward`` inside the
backward pass would write ``.grad`` even under ``torch.autograd.grad``; ``torch.utils.checkpoint`` would recompute
the :math:`NF^2` Gram product as well, because the product is the node that keeps :math:`R_c`.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from gprf.linalg.weighted_gram import _add_outer, weighted_gram

#: A featurisation, from rows ``(..., n, d)`` to their features ``(..., n, F)``.
FeatureFunction = Callable[[Tensor], Tensor]


def _row_chunks(num_rows: int, chunk_size: int) -> range:
    return range(0, num_rows, chunk_size)


def _chunk_features(feature_fn: FeatureFunction | None, inputs: Tensor) -> Tensor:
    """The features of a chunk of rows (the rows themselves when there is no feature function)."""
    return inputs if feature_fn is None else feature_fn(inputs)


def _chunk_noise(noise: Tensor, start: int, stop: int) -> Tensor:
    return noise if noise.size(-1) == 1 else noise[..., start:stop]


class _ChunkedGramProjection(torch.autograd.Function):
    @staticmethod
    def forward(ctx, feature_fn, chunk_size, product_dtype, inputs, noise, rhs, *params):
        accumulate = rhs.new_zeros(()).dtype  # G and P are summed in the rhs dtype (the factor dtype)
        gram, projection = None, None
        for start in _row_chunks(inputs.size(-2), chunk_size):
            stop = min(start + chunk_size, inputs.size(-2))
            root = _chunk_features(feature_fn, inputs[..., start:stop, :])
            chunk_noise = _chunk_noise(noise, start, stop)
            chunk_gram = weighted_gram(root.to(product_dtype), chunk_noise.to(product_dtype))
            weighted_rhs = rhs[..., start:stop, :] / chunk_noise.unsqueeze(-1)
            chunk_projection = root.to(accumulate).mT @ weighted_rhs
            if gram is None:
                gram, projection = chunk_gram.to(accumulate), chunk_projection
            else:  # in place, promoting each chunk's Gram (the first chunk has broadcast both to the batch)
                gram += chunk_gram
                projection += chunk_projection
        ctx.feature_fn, ctx.chunk_size, ctx.product_dtype = feature_fn, chunk_size, product_dtype
        ctx.save_for_backward(inputs, noise, rhs, gram, projection, *params)
        return gram, projection

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_gram, grad_projection):
        inputs, noise, rhs, gram, projection, *params = ctx.saved_tensors
        needs_inputs, needs_noise, needs_rhs = ctx.needs_input_grad[3:6]
        param_index = [i for i, needed in enumerate(ctx.needs_input_grad[6:]) if needed]
        wrt_params = [params[i] for i in param_index]
        symmetric = grad_gram + grad_gram.mT
        symmetric_products = symmetric.to(ctx.product_dtype)
        grad_projection_products = grad_projection.to(ctx.product_dtype)
        constant = noise.size(-1) == 1
        grad_inputs = torch.zeros_like(inputs) if needs_inputs else None
        grad_rhs = torch.zeros_like(rhs) if needs_rhs else None
        grad_noise = None
        if needs_noise:
            grad_noise = torch.zeros_like(noise)
            if constant:  # dG/ds = -G/s and dP/ds = -P/s for one variance per batch member
                grad_noise = -((gram * grad_gram).sum((-2, -1)) + (projection * grad_projection).sum((-2, -1)))
                grad_noise = (grad_noise.unsqueeze(-1) / noise).sum_to_size(noise.shape)
        grad_params = [None] * len(params)
        for start in _row_chunks(inputs.size(-2), ctx.chunk_size):
            stop = min(start + ctx.chunk_size, inputs.size(-2))
            chunk_inputs = inputs[..., start:stop, :].detach().requires_grad_(needs_inputs)
            with torch.enable_grad():
                root = _chunk_features(ctx.feature_fn, chunk_inputs)
            # The chunk gradients in the product dtype, as the forward products (no N x F cast in float32 models).
            values = root.detach().to(ctx.product_dtype)
            inverse = (1 / _chunk_noise(noise, start, stop).unsqueeze(-1)).to(ctx.product_dtype)
            chunk_rhs = rhs[..., start:stop, :].to(ctx.product_dtype)
            # Q = R (dG + dG^T) + Y dP^T accumulated into one GEMM's output (broadcast to the batch first).
            combined = values @ symmetric_products
            batch = combined.shape[:-2]
            root_grad_projection = values @ grad_projection_products
            chunk_rhs = chunk_rhs.expand(*batch, *chunk_rhs.shape[-2:])
            combined = _add_outer(combined, chunk_rhs, grad_projection_products.mT.expand(*batch, -1, -1))
            grad_root = combined * inverse
            if needs_rhs:
                chunk_grad_rhs = (root_grad_projection * inverse).to(rhs.dtype)
                grad_rhs[..., start:stop, :] = chunk_grad_rhs.sum_to_size(grad_rhs[..., start:stop, :].shape)
            if needs_noise and not constant:
                quadratic = 0.5 * ((combined * values).sum(-1) + (chunk_rhs * root_grad_projection).sum(-1))
                chunk_grad_noise = (-quadratic * inverse.squeeze(-1).square()).to(noise.dtype)
                grad_noise[..., start:stop] = chunk_grad_noise.sum_to_size(grad_noise[..., start:stop].shape)
            targets = ([chunk_inputs] if needs_inputs else []) + wrt_params
            if not targets or not root.requires_grad:
                continue
            grads = torch.autograd.grad(
                root, targets, grad_root.sum_to_size(root.shape).to(root.dtype), allow_unused=True
            )
            if needs_inputs:
                grad_inputs[..., start:stop, :] = grads[0]
                grads = grads[1:]
            for index, grad in zip(param_index, grads, strict=True):
                if grad is not None:
                    grad_params[index] = grad if grad_params[index] is None else grad_params[index] + grad
        return (None, None, None, grad_inputs, grad_noise, grad_rhs, *grad_params)


def chunked_gram_projection(
    inputs: Tensor,
    feature_fn: FeatureFunction | None,
    noise: Tensor,
    rhs: Tensor | None,
    *,
    chunk_size: int,
    product_dtype: torch.dtype,
    accumulate_dtype: torch.dtype = torch.float64,
    params: Sequence[Tensor] = (),
) -> tuple[Tensor, Tensor | None]:
    r""":math:`(\sum_c R_c^\top\Sigma_c^{-1}R_c,\; \sum_c R_c^\top\Sigma_c^{-1}Y_c)` over chunks of ``chunk_size`` rows.

    Args:
        inputs: :math:`X` ``(*batch, N, d)``; the features of rows ``X_c`` are ``feature_fn(X_c)``
            ``(*batch, n_c, F)``, or ``X_c`` itself when ``feature_fn`` is ``None`` (a root already formed).
        feature_fn: :math:`f`, a deterministic function of a row chunk; any tensor it differentiates through besides
            its argument must be listed in ``params``.
        noise: Variances ``(*batch, N)``, or ``(*batch, 1)`` for one per batch member.
        rhs: :math:`Y` ``(*batch, N, k)``, or ``None`` (no projection).
        chunk_size: Rows per chunk.
        product_dtype: The dtype of each chunk's Gram product (the features' dtype, or the accumulation dtype for
            exact products of lower-precision features).
        accumulate_dtype: The dtype :math:`G` and :math:`P` are summed and returned in (the factor dtype).
        params: The parameters :math:`\theta` of ``feature_fn`` that gradients should reach.

    Nothing of size :math:`N\times F` is kept for the backward pass, which recomputes :math:`R_c` chunk by chunk.
    """
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive number of rows, got {chunk_size!r}.")
    if noise.size(-1) not in (1, inputs.size(-2)):
        raise ValueError(
            f"noise must have shape (..., {inputs.size(-2)}) or (..., 1) for inputs of {inputs.size(-2)} rows, "
            f"got {tuple(noise.shape)}."
        )
    projection_rhs = inputs.new_zeros((*inputs.shape[:-1], 0)) if rhs is None else rhs
    gram, projection = _ChunkedGramProjection.apply(
        feature_fn,
        chunk_size,
        product_dtype,
        inputs,
        noise.to(accumulate_dtype),
        projection_rhs.to(accumulate_dtype),
        *params,
    )
    return gram, None if rhs is None else projection
