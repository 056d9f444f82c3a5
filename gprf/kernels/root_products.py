r"""Products of two random feature roots formed by GPyTorch's ``ProductKernel`` (``ScaleKernel(k1) * k2``), as the
product kernel's own features.

GPyTorch multiplies its factors' covariances elementwise; for two gprf random roots the product must be the same
function wherever the model is evaluated (training, prediction, sample paths) and its factors' draws independent. So the
product of two roots is delegated to one :class:`~gprf.kernels.FeatureProductKernel` per pair of kernels, built once
with the budget of ``k1 * k2`` (:func:`~gprf.kernels.feature_product_kernel.default_product_budget`) and kept
(:func:`product_of`): its method (Kronecker, joint frequencies, random pairing), its pairing draws and its copies of
factors that repeat another's draws (``ScaleKernel(k) * k``;
:func:`~gprf.kernels.independent_factors.independent_factors`) are then the same at every evaluation. Each root carries
where it came from (a :class:`~gprf.kernels.kernel_origin.KernelOrigin`: its kernel and the inputs it featurised), which
is what the product needs to combine the roots, or to featurise a factor again with its own draws.

The product kernels live with the first factor's kernel object (a deep copy of the model, e.g. BoTorch's fantasy and
frozen copies, copies them along), are rebuilt when a factor's draws or batch shape change, and follow the factors'
device and dtype. They are not in the model's ``state_dict``: pairing draws come from the factors' seeds when every
factor is seeded, else from the global RNG, so a model loaded from a ``state_dict`` pairs again (the product kernel's
own spelling, ``ScaleKernel(k1 * k2)``, keeps its draws in its buffers).

GPyTorch forms the *cross* covariances of its ``ProductKernel`` itself, as the elementwise product of its factors'
dense cross covariances (the exact Kronecker product of the factors' estimates), and predicts it with its own default
strategy; for a product of two random roots that is sketched (joint or permutation features), that is not the
covariance the model was trained with, so building such a product warns once with
:class:`~gprf.exceptions.DispatchFallbackWarning` (gprf's spelling predicts with gprf's strategy; sample paths follow
the product's features either way).
"""

from __future__ import annotations

import warnings
from typing import Any

from gpytorch.kernels import Kernel
from torch import Tensor

from gprf.exceptions import DispatchFallbackWarning
from gprf.features.nested import mixed_seed
from gprf.features.versions import feature_versions
from gprf.kernels.feature_product_kernel import FeatureProductKernel, default_product_budget
from gprf.kernels.independent_factors import feature_maps
from gprf.kernels.kernel_origin import KernelOrigin, product_origin
from gprf.linalg import FeatureRoot, FeatureRootLinearOperator, LazyFeatures
from gprf.linalg.root_algebra import joined, product_outputscale, register_root_product


def _pairing_seed(kernels: tuple[Kernel, ...]) -> int | None:
    """A seed of the pairing draws from the factors' seeds (``None`` unless every feature map is seeded)."""
    seeds = [feature_map.seed for kernel in kernels for feature_map in feature_maps(kernel)]
    if not seeds or any(seed is None for seed in seeds):
        return None
    seed = seeds[0]
    for other in seeds[1:]:
        seed = mixed_seed(seed, other)
    return seed


def product_of(first: Kernel, second: Kernel) -> FeatureProductKernel:
    """The :class:`~gprf.kernels.FeatureProductKernel` of ``first`` and ``second`` (feature kernels without
    ``ScaleKernel``), built once per pair and kept with ``first`` (rebuilt when a factor's draws or batch shape
    change)."""
    products = first.__dict__.setdefault("_gprf_root_products", {})
    stamp = (feature_versions(first), feature_versions(second), first.batch_shape, second.batch_shape)
    entry = products.get(second)
    if entry is None or entry[0] != stamp:
        factors = (first, second)
        product = FeatureProductKernel(
            *factors, num_features=default_product_budget(factors), seed=_pairing_seed(factors)
        )
        if product.method != "kronecker":
            _warn_sketched(product)
        entry = products[second] = (stamp, product)
    return entry[1]


def _warn_sketched(product: FeatureProductKernel) -> None:
    names = " and ".join(type(kernel).__name__ for kernel in product.kernels)
    warnings.warn(
        f"GPyTorch's ProductKernel of the random-feature kernels {names}: gprf gives their product the product "
        f"kernel's {product.method} features ({product.root_dim} columns), as k1 * k2 does, but GPyTorch forms the "
        "cross covariances K(X*, X) of a ProductKernel itself, as the elementwise product of the factors' (their "
        "exact Kronecker product, another estimate), and predicts with its default strategy, so model(x), posterior() "
        "and fantasies do not match the training covariance. Write the product as one gprf kernel, ScaleKernel(k1 * "
        "k2) or FeatureProductKernel(ScaleKernel(k1), k2) (gprf.random_features converts an expression); BoTorch's "
        "sample paths (draw_matheron_paths) follow the product's features in either spelling.",
        DispatchFallbackWarning,
        stacklevel=4,
    )


def _follow(product: FeatureProductKernel, like: Tensor | LazyFeatures) -> None:
    """Move the product's own draws (pairing, copied factors) to the device and dtype of the roots ``like``."""
    for buffer in product.buffers():
        if buffer.device != like.device or (buffer.is_floating_point() and buffer.dtype != like.dtype):
            product.to(device=like.device, dtype=like.dtype)
            return


def multiply_roots(first: FeatureRootLinearOperator, second: FeatureRootLinearOperator) -> Any:
    """The product of two feature-root covariances whose roots have a
    :class:`~gprf.kernels.kernel_origin.KernelOrigin`: the root of :func:`product_of` their kernels, with the product
    of their amplitudes; ``None`` for roots of unknown origin."""
    origins = (first.origin, second.origin)
    if not all(isinstance(origin, KernelOrigin) for origin in origins):
        return None
    product = product_of(origins[0].kernel, origins[1].kernel)
    roots = (first.feature_root, second.feature_root)
    _follow(product, roots[0].source)
    lazy = next((root.source for root in roots if isinstance(root.source, LazyFeatures)), None)
    sources = [
        root.source if factor is origin.kernel else origin.root_like(factor, lazy)
        for root, origin, factor in zip(roots, origins, product.kernels, strict=True)
    ]
    feature_root = FeatureRoot(
        joined(sources, product.combine),
        outputscale=product_outputscale(*roots),
        versions=feature_versions(product),
    )
    return FeatureRootLinearOperator.from_root(feature_root, product_origin(product, *origins))


register_root_product(multiply_roots)
