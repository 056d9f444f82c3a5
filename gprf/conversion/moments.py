r"""Closed-form mean and variance of a composite random-feature estimate, row by row.

For an expression built by :func:`gprf.random_features` (or by hand) the estimate :math:`\hat k(x_i, y_i)` has

* ``ScaleKernel``: mean :math:`\sigma^2 m`, variance :math:`\sigma^4 v` of its base;
* sums: the parts draw independently, so means and variances add;
* products: :meth:`gprf.kernels.FeatureProductKernel.variance`, mean the product of the factors' means;
* feature kernels: their feature map's ``expected_kernel`` and ``variance`` (or the kernel's own, where its root
  weights the map's columns), zero variance for exact roots (linear and task kernels).

Tests use it for z-scores of Monte-Carlo means; users for the error a budget buys before training.
"""

from __future__ import annotations

import math

from gpytorch.kernels import Kernel, ScaleKernel
from torch import Tensor

from gprf.features.versions import feature_versions
from gprf.kernels import FeatureProductKernel, FeatureSumKernel


def _select(kernel: Kernel, x: Tensor) -> Tensor:
    return x if kernel.active_dims is None else x.index_select(-1, kernel.active_dims.to(x.device))


def approximation_moments(kernel: Kernel, x1: Tensor, x2: Tensor, selected: bool = False) -> tuple[Tensor, Tensor]:
    r""":math:`(E\hat k(x1_i, x2_i), \mathrm{Var}\,\hat k(x1_i, x2_i))` for raw inputs paired row by row
    (``selected``: the kernel's ``active_dims`` already applied).

    Raises ``NotImplementedError`` for parts without a closed form (e.g. non-iid Fourier samplers)."""
    z1, z2 = (x1, x2) if selected else (_select(kernel, x1), _select(kernel, x2))
    if isinstance(kernel, FeatureProductKernel):
        means = [approximation_moments(factor, z1, z2)[0] for factor in kernel.kernels]
        # Its variance applies its own active_dims (inside ScaleKernel they are the wrapper's, already applied).
        return math.prod(means), kernel.variance_of_selected(z1, z2)
    if isinstance(kernel, ScaleKernel):
        # GPyTorch's ScaleKernel takes over its base kernel's active_dims and calls the base's forward.
        mean, variance = approximation_moments(kernel.base_kernel, z1, z2, selected=True)
        scale = kernel.outputscale.unsqueeze(-1)
        return scale * mean, scale.square() * variance
    if isinstance(kernel, FeatureSumKernel):
        parts = [approximation_moments(part, z1, z2) for part in kernel.kernels]
        return sum(mean for mean, _ in parts), sum(variance for _, variance in parts)
    if not feature_versions(kernel):  # an exact root
        value = kernel.forward(z1, z2, diag=True)
        return value, value.new_zeros(value.shape)
    if callable(getattr(kernel, "variance", None)) and callable(getattr(kernel, "expected_kernel", None)):
        return kernel.expected_kernel(z1, z2), kernel.variance(z1, z2)
    feature_map = getattr(kernel, "feature_map", None)
    if feature_map is None:
        raise NotImplementedError(f"No closed-form moments for {type(kernel).__name__}.")
    if getattr(kernel, "has_lengthscale", False):
        z1, z2 = kernel.scale_inputs(z1), kernel.scale_inputs(z2)
    return feature_map.expected_kernel(z1, z2), feature_map.variance(z1, z2)
