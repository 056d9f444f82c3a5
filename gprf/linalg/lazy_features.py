r"""A feature root :math:`R = f(X)` kept as its inputs and feature function, formed only by consumers that need it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from gprf.linalg.chunked_gram import FeatureFunction, chunked_gram_projection


class LazyFeatures:
    r"""The root :math:`R = f(X)` ``(*batch, N, F)`` of a feature kernel, not formed.

    The marginal likelihood only needs :math:`R^\top\Sigma^{-1}R` and :math:`R^\top\Sigma^{-1}Y`, which
    :meth:`weighted_sums` accumulates over row chunks (:func:`~gprf.linalg.chunked_gram.chunked_gram_projection`):
    memory :math:`O(\text{chunk}\cdot F + F^2)` instead of :math:`O(NF)`. Consumers of the root itself (prediction,
    sampling, dense evaluations) call :meth:`materialize`.

    Args:
        inputs: :math:`X` ``(*batch, N, d)``, as ``feature_fn`` takes them.
        feature_fn: :math:`f`, deterministic, mapping rows ``(*batch, n, d)`` to their features ``(*batch', n, F)``.
        chunk_size: Rows per chunk of the chunked sums.
        params: The tensors requiring gradients that ``feature_fn`` uses besides its argument (a kernel's
            parameters); gradients of the chunked sums reach only these and ``inputs``.

    The shape, dtype and device are read from the features of the first row (one cheap evaluation).
    """

    def __init__(
        self, inputs: Tensor, feature_fn: FeatureFunction, chunk_size: int, params: Sequence[Tensor] = ()
    ) -> None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive number of rows, got {chunk_size!r}.")
        if inputs.dim() < 2 or inputs.size(-2) == 0:
            raise ValueError(f"inputs must have shape (..., N, d) with N >= 1, got {tuple(inputs.shape)}.")
        self.inputs = inputs
        self.feature_fn = feature_fn
        self.chunk_size = chunk_size
        self.params = tuple(params)
        with torch.no_grad():
            first = feature_fn(inputs[..., :1, :])
        self.shape = torch.Size((*first.shape[:-2], inputs.size(-2), first.size(-1)))
        self.dtype = first.dtype
        self.device = first.device
        self._formed: Tensor | None = None

    @property
    def requires_grad(self) -> bool:
        return self.inputs.requires_grad or any(param.requires_grad for param in self.params)

    def requires_grad_(self, requires_grad: bool = True) -> LazyFeatures:
        """Set ``requires_grad`` of the inputs in place (linear_operator's ``requires_grad_``)."""
        self.inputs.requires_grad_(requires_grad)
        return self

    def materialize(self) -> Tensor:
        """:math:`R = f(X)`, formed (differentiable when gradients are enabled).

        The result is kept for later calls (a prediction reads the test root more than once) unless it was formed
        without gradients and gradients are wanted now.
        """
        formed = self._formed
        if formed is None or not (formed.requires_grad or not torch.is_grad_enabled() or not self.requires_grad):
            formed = self._formed = self.feature_fn(self.inputs)
        return formed

    def rows(self, index: slice) -> LazyFeatures:
        """The lazy root of the rows ``index`` (a slice)."""
        return LazyFeatures(self.inputs[..., index, :], self.feature_fn, self.chunk_size, self.params)

    def detach(self) -> LazyFeatures:
        """The same root cut from the computation graph (its inputs detached, its parameters constants)."""

        def detached(inputs: Tensor) -> Tensor:
            with torch.no_grad():
                return self.feature_fn(inputs)

        return LazyFeatures(self.inputs.detach(), detached, self.chunk_size)

    def representation(self) -> tuple[Tensor, ...]:
        """The tensors behind the root, for linear_operator's bookkeeping."""
        return (self.inputs,)

    def representation_tree(self) -> Callable[[Tensor], LazyFeatures]:
        """Rebuilds the root from :meth:`representation` (as linear_operator rebuilds operators)."""
        return self.with_inputs

    def with_inputs(self, inputs: Tensor) -> LazyFeatures:
        """The root of other ``inputs`` with the same feature function (of the same shape: no new probe)."""
        if inputs.shape != self.inputs.shape:
            return LazyFeatures(inputs, self.feature_fn, self.chunk_size, self.params)
        copy = object.__new__(LazyFeatures)
        copy.__dict__.update(self.__dict__, inputs=inputs, _formed=None)
        return copy

    def nonfinite_rows(self) -> Tensor:
        """Mask ``(*batch, N)`` of the rows whose features hold NaN or inf, found chunk by chunk."""
        masks = []
        with torch.no_grad():
            for start in range(0, self.shape[-2], self.chunk_size):
                chunk = self.feature_fn(self.inputs[..., start : start + self.chunk_size, :])
                masks.append(~torch.isfinite(chunk).all(-1))
        return torch.cat(masks, dim=-1)

    def weighted_sums(
        self, noise: Tensor, rhs: Tensor | None, product_dtype: torch.dtype, accumulate_dtype: torch.dtype
    ) -> tuple[Tensor, Tensor | None]:
        r""":math:`(R^\top\Sigma^{-1}R,\; R^\top\Sigma^{-1}Y)` in ``accumulate_dtype``, chunk by chunk."""
        return chunked_gram_projection(
            self.inputs,
            self.feature_fn,
            noise,
            rhs,
            chunk_size=self.chunk_size,
            product_dtype=product_dtype,
            accumulate_dtype=accumulate_dtype,
            params=self.params,
        )
