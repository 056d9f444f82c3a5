r"""Where a feature root came from: the kernel and the inputs it featurised, which is what GPyTorch's
``ProductKernel`` of two random roots needs to form the product kernel's own features
(:mod:`gprf.kernels.root_products`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from gprf.linalg import LazyFeatures

# Where a factor's inputs end in the inputs of a product origin, and the layouts of the two factors' origins.
Layout = tuple[int, Any, Any] | None


@dataclass(frozen=True)
class KernelOrigin:
    r"""A root as ``kernel``'s features of ``inputs`` (raw, the kernel's ``active_dims`` applied, as its ``forward``
    took them): without amplitude, :math:`R = f(X)`.

    For the product of two origins, ``kernel`` is their :class:`~gprf.kernels.FeatureProductKernel`, ``inputs`` both
    factors' inputs side by side and ``layout`` ``(width of the first, layout of the first, layout of the second)``.
    """

    #: The kernel whose features the root holds.
    kernel: Kernel
    #: The rows the kernel featurised.
    inputs: Tensor
    layout: Layout = None

    def features_of(self, inputs: Tensor, kernel: Kernel | None = None) -> Tensor:
        """The root of rows ``inputs`` (laid out as :attr:`inputs`) by ``kernel`` (default :attr:`kernel`; a kernel
        of the same structure, e.g. a copy with its own draws)."""
        return _features(self.kernel if kernel is None else kernel, self.layout, inputs)

    def root_like(self, kernel: Kernel, lazy: LazyFeatures | None) -> Tensor | LazyFeatures:
        """``kernel``'s root of :attr:`inputs`: formed, or lazy in the chunks of ``lazy`` when given."""
        if lazy is None:
            return self.features_of(self.inputs, kernel)
        params = [param for param in kernel.parameters() if param.requires_grad]
        return LazyFeatures(self.inputs, lambda rows: self.features_of(rows, kernel), lazy.chunk_size, params)


def _features(kernel: Kernel, layout: Layout, inputs: Tensor) -> Tensor:
    if layout is None:
        return kernel.features(inputs)
    width, first, second = layout
    first_root = _features(kernel.kernels[0], first, inputs[..., :width])
    return kernel.combine([first_root, _features(kernel.kernels[1], second, inputs[..., width:])])


def product_origin(product: Kernel, first: KernelOrigin, second: KernelOrigin) -> KernelOrigin | None:
    """The origin of ``product``'s root of two origins' inputs (``None`` when their inputs' dtypes differ)."""
    if first.inputs.dtype != second.inputs.dtype:
        return None
    batch_shape = torch.broadcast_shapes(first.inputs.shape[:-2], second.inputs.shape[:-2])
    inputs = torch.cat([o.inputs.expand(*batch_shape, *o.inputs.shape[-2:]) for o in (first, second)], dim=-1)
    return KernelOrigin(product, inputs, (first.inputs.size(-1), first.layout, second.layout))
