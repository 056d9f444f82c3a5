"""Sums of random-feature kernels that keep one low-rank root."""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel, ScaleKernel
from torch import Tensor

from gprf.kernels.feature_kernel import FeatureKernel


def unwrap_scale_kernel(kernel: Kernel) -> Kernel:
    """The kernel inside any ``ScaleKernel`` wrappers."""
    while isinstance(kernel, ScaleKernel):
        kernel = kernel.base_kernel
    return kernel


def is_feature_kernel(kernel: Kernel) -> bool:
    """A feature kernel, or a ScaleKernel around one."""
    return isinstance(unwrap_scale_kernel(kernel), FeatureKernel)


def _active_inputs(kernel: Kernel, x: Tensor) -> Tensor:
    """The columns of ``x`` a summand sees (GPyTorch selects ``active_dims`` in ``Kernel.__call__``, not here)."""
    return x if kernel.active_dims is None else x.index_select(-1, kernel.active_dims)


def scaled_features(kernel: Kernel, x: Tensor) -> Tensor:
    """The real root of ``kernel`` at raw inputs, with any ScaleKernel amplitude folded in as sqrt(outputscale)."""
    if isinstance(kernel, ScaleKernel):
        scale = kernel.outputscale.sqrt().unsqueeze(-1).unsqueeze(-1)
        return scaled_features(kernel.base_kernel, x) * scale
    if not isinstance(kernel, FeatureKernel):
        raise TypeError(f"{type(kernel).__name__} is not a random-feature kernel.")
    return kernel.features(x)


class FeatureSumKernel(FeatureKernel):
    r"""Sum :math:`k = \sum_j k_j` of random-feature kernels with root :math:`[r_1(x), \ldots, r_J(x)]`.

    The concatenated root satisfies :math:`[r_1, \ldots, r_J][r_1, \ldots, r_J]^\top = \sum_j r_j r_j^\top`,
    so the sum keeps the :math:`O(NF^2)` training and feature-space prediction with
    :math:`F = \sum_j F_j`. Summands may be feature kernels or ``ScaleKernel``\ s around them (each with
    its own amplitude). ``k1 + k2`` between feature kernels builds this kernel.

    Example:
        >>> short = ScaleKernel(RandomFourierKernel(256, num_dims=3))
        >>> long = ScaleKernel(RandomFourierKernel(256, num_dims=3, kernel="matern52"))
        >>> covar_module = FeatureSumKernel(short, long)
    """

    def __init__(self, *kernels: Kernel, **kwargs) -> None:
        if len(kernels) < 2:
            raise ValueError("FeatureSumKernel needs at least two kernels.")
        for kernel in kernels:
            if not is_feature_kernel(kernel):
                raise TypeError(
                    f"FeatureSumKernel only adds random-feature kernels (optionally in ScaleKernel), got "
                    f"{type(kernel).__name__}."
                )
        super().__init__(**kwargs)
        flat: list[Kernel] = []
        for kernel in kernels:
            flat.extend(kernel.kernels if isinstance(kernel, FeatureSumKernel) else [kernel])
        self.kernels = torch.nn.ModuleList(flat)

    @property
    def num_features(self) -> int:
        return sum(unwrap_scale_kernel(kernel).num_features for kernel in self.kernels)

    def features(self, x: Tensor) -> Tensor:
        roots = [scaled_features(kernel, _active_inputs(kernel, x)) for kernel in self.kernels]
        batch_shape = torch.broadcast_shapes(*(root.shape[:-2] for root in roots))
        return torch.cat([root.expand(*batch_shape, *root.shape[-2:]) for root in roots], dim=-1)

    # GPyTorch's generic versions walk nested sub-kernels by dotted name; rebuild the list instead.
    def __getitem__(self, index) -> Kernel:
        return FeatureSumKernel(*(kernel[index] for kernel in self.kernels))

    def expand_batch(self, *sizes) -> Kernel:
        return FeatureSumKernel(*(kernel.expand_batch(*sizes) for kernel in self.kernels))
