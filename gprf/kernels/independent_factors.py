r"""Independent feature draws for the factors of a product.

A product estimate :math:`\hat k_1\hat k_2` is unbiased for :math:`k_1k_2` only when the factors' draws are
independent. A factor that repeats another's draws does not give :math:`k^2`: ``k * k`` with one draw of random
Fourier frequencies :math:`w_j` pairs :math:`(w_j, w_j)` into the joint frequency, whose features estimate
:math:`k(2\Delta)` instead of :math:`k(\Delta)^2` (an :math:`O(1)` bias), and the Kronecker or permuted product
estimates :math:`E\hat k^2 = k^2 + \mathrm{Var}\,\hat k`. :func:`independent_factors` finds such factors (the same
feature map object, the same seed, the same draw streams or equal draws) and gives each a copy with its own draws.
"""

from __future__ import annotations

import copy

import torch
from gpytorch.kernels import Kernel

from gprf.features import FeatureMapBase
from gprf.features.nested import mixed_seed


def feature_maps(module: torch.nn.Module) -> list[FeatureMapBase]:
    """The random feature maps inside ``module``."""
    return [child for child in module.modules() if isinstance(child, FeatureMapBase)]


def _equal_buffers(first: torch.nn.Module, second: torch.nn.Module, names: list[str]) -> bool:
    for name in names:
        a, b = getattr(first, name, None), getattr(second, name, None)
        if a is None or b is None or a.shape != b.shape or not torch.equal(a, b.to(a.device, a.dtype)):
            return False
    return bool(names)


def shares_draws(first: FeatureMapBase, second: FeatureMapBase) -> bool:
    """Whether two feature maps' draws are (or may be) the same: the same object, the same seed (seeded draws of
    any two maps read the same random numbers), the same draw streams, or maps of one class with equal draws (e.g.
    a deep copy). Compares buffers, a host synchronisation: for construction, not forward passes."""
    if first is second or (first.seed is not None and first.seed == second.seed):
        return True
    if _equal_buffers(first, second, ["draw_streams"]):
        return True
    return type(first) is type(second) and _equal_buffers(first, second, first._random_buffer_names)


def with_own_draws(kernel: Kernel, avoid: list[FeatureMapBase]) -> Kernel:
    r"""A copy of ``kernel`` with every feature map redrawn independently, sharing every parameter.

    The copy holds the same ``Parameter`` objects as ``kernel`` (training one trains the other: ``k * k`` keeps one
    lengthscale), so only the draws differ. A seeded map takes the seed :func:`~gprf.features.nested.mixed_seed`
    ``(seed, key)`` for the first key that no map of ``avoid`` uses, so the copy is reproducible and
    ``resample_features()`` without a generator redraws the copy's own draws; an unseeded map draws from the global
    RNG.
    """
    memo = {id(parameter): parameter for parameter in kernel.parameters()}
    copied = copy.deepcopy(kernel, memo)
    taken = {feature_map.seed for feature_map in avoid}
    for feature_map in feature_maps(copied):
        if feature_map.seed is not None:
            key = 1
            while mixed_seed(feature_map.seed, key) in taken:
                key += 1
            feature_map.seed = mixed_seed(feature_map.seed, key)
            taken.add(feature_map.seed)
        feature_map.resample()
    return copied


def independent_factors(kernels: tuple[Kernel, ...]) -> tuple[Kernel, ...]:
    """``kernels`` with every factor whose draws repeat an earlier factor's (:func:`shares_draws`) replaced by
    :func:`with_own_draws` of it; the other factors are kept as they are (the same objects)."""
    seen: list[FeatureMapBase] = []
    factors = []
    for kernel in kernels:
        maps = feature_maps(kernel)
        if any(shares_draws(mine, other) for mine in maps for other in seen):
            kernel = with_own_draws(kernel, seen)
            maps = feature_maps(kernel)
        seen.extend(maps)
        factors.append(kernel)
    return tuple(factors)
