r"""Translations of composite GPyTorch kernels: ``ScaleKernel``, sums (``AdditiveKernel``), products
(``ProductKernel``) and ``AdditiveStructureKernel``; each splits its features by the budget rule
(:mod:`gprf.conversion.budget`) and translates its parts."""

from __future__ import annotations

from gpytorch.kernels import (
    AdditiveKernel,
    AdditiveStructureKernel,
    IndexKernel,
    Kernel,
    LinearKernel,
    ProductKernel,
    ScaleKernel,
)

from gprf.conversion.leaves import stationary_spectrum_of
from gprf.conversion.registry import Context, describe, register_translation, translate
from gprf.conversion.tying import tie
from gprf.features.versions import feature_versions
from gprf.kernels import AdditiveFeatureKernel, FeatureKernel, FeatureProductKernel, FeatureSumKernel
from gprf.kernels.exact import StationaryTarget, find_exact_target
from gprf.kernels.exact_expression import scale_like
from gprf.kernels.feature_kernel import unwrap_scale_kernel


def is_exact(kernel: Kernel) -> bool:
    """Whether the translation of ``kernel`` has an exact root (linear and task kernels, and expressions of them):
    such parts cost their exact width and take no share of a sum's features."""
    if isinstance(kernel, ScaleKernel):
        return is_exact(kernel.base_kernel)
    if isinstance(kernel, (AdditiveKernel, ProductKernel)):
        return all(is_exact(part) for part in kernel.kernels)
    if isinstance(kernel, FeatureKernel):
        return not feature_versions(kernel)
    return isinstance(kernel, (LinearKernel, IndexKernel))


def root_columns(kernel: Kernel) -> int:
    """Columns of a translated kernel's root."""
    return unwrap_scale_kernel(kernel).root_dim


@register_translation(ScaleKernel)
def translate_scale(kernel: ScaleKernel, context: Context) -> Kernel:
    """``ScaleKernel`` around the translated base kernel, sharing ``raw_outputscale`` (parameter, constraint,
    prior)."""
    num_dims = None if kernel.active_dims is None else len(kernel.active_dims)
    base = translate(kernel.base_kernel, context.child("base_kernel", context.features(kernel), num_dims))
    return scale_like(base, kernel)


@register_translation(AdditiveKernel)
def translate_sum(kernel: AdditiveKernel, context: Context) -> Kernel:
    """:class:`~gprf.kernels.FeatureSumKernel` of the translated parts (concatenated roots)."""
    total = context.features(kernel)
    parts = list(kernel.kernels)
    translated: list[Kernel | None] = [None] * len(parts)
    exact_width = 0
    for index, part in enumerate(parts):
        if is_exact(part):
            translated[index] = translate(part, context.child(f"kernels.{index}", total))
            exact_width += root_columns(translated[index])
    random = [index for index, part in enumerate(parts) if not is_exact(part)]
    paths = [context.child(f"kernels.{index}", 0).path for index in random]
    shares = context.budget.split_sum(total - exact_width, paths, describe(context.path))
    for index, share in zip(random, shares, strict=True):
        translated[index] = translate(parts[index], context.child(f"kernels.{index}", share))
    return FeatureSumKernel(*translated) if len(translated) > 1 else translated[0]


@register_translation(ProductKernel)
def translate_product(kernel: ProductKernel, context: Context) -> Kernel:
    """:class:`~gprf.kernels.FeatureProductKernel` of the translated factors: each random factor draws the
    product's features, the product map forms as many product features from them (with at most one random
    factor, the exact Kronecker product with the exact factors)."""
    features = context.features(kernel)
    random = sum(not is_exact(part) for part in kernel.kernels)
    if random >= 2 and features > 2:
        features -= features % 2  # joint-frequency products of Fourier factors come in cosine/sine pairs
    factors = [
        translate(part, context.child(f"kernels.{index}", features)) for index, part in enumerate(kernel.kernels)
    ]
    if len(factors) == 1:
        return factors[0]
    return FeatureProductKernel(*factors, num_features=features if random >= 2 else None, seed=context.next_seed())


@register_translation(AdditiveStructureKernel)
def translate_additive_structure(kernel: AdditiveStructureKernel, context: Context) -> Kernel:
    """:class:`~gprf.kernels.AdditiveFeatureKernel` (first order): each of the ``num_dims`` one-dimensional
    components gets ``F / num_dims`` features (rounded down to an even number); ``ScaleKernel`` wrappers of the base
    kernel become ``ScaleKernel`` wrappers of the result (:math:`\\sum_j \\sigma^2 k_j = \\sigma^2\\sum_j k_j`)."""
    features, num_dims = context.features(kernel), kernel.num_dims
    scales, base, path = [], kernel.base_kernel, "base_kernel"
    while isinstance(base, ScaleKernel):
        scales.append(base)
        base, path = base.base_kernel, f"{path}.base_kernel"
    base_context = context.child(path, features)
    if not isinstance(find_exact_target(base), StationaryTarget):
        raise TypeError(
            base_context.error(
                base,
                "inside AdditiveStructureKernel has no per-dimension random features",
                "use a stationary base kernel, e.g. RBFKernel or MaternKernel (optionally in ScaleKernel)",
            )
        )
    if base.active_dims is not None or any(scale.active_dims is not None for scale in scales):
        raise ValueError(
            base_context.error(
                base,
                "has active_dims inside AdditiveStructureKernel",
                "set active_dims on the AdditiveStructureKernel itself",
            )
        )
    if base.ard_num_dims not in (None, 1, num_dims):
        raise ValueError(
            base_context.error(
                base,
                f"has ard_num_dims={base.ard_num_dims} inside AdditiveStructureKernel(num_dims={num_dims})",
                f"use ard_num_dims={num_dims} (one lengthscale per dimension) or None",
            )
        )
    per_dim = features // num_dims
    per_dim -= per_dim % 2
    if per_dim < 2:
        raise ValueError(
            context.error(
                kernel,
                f"gets num_features={features} for {num_dims} one-dimensional components, fewer than 2 each",
                f"raise num_features to at least {2 * num_dims}",
            )
        )
    active_dims = kernel.active_dims
    if active_dims is not None and len(active_dims) != num_dims:
        raise ValueError(
            context.error(
                kernel,
                f"has active_dims selecting {len(active_dims)} columns but num_dims={num_dims}",
                "make them agree",
            )
        )
    additive = AdditiveFeatureKernel(
        per_dim,
        num_dims=num_dims,
        kernel=stationary_spectrum_of(base, base_context),
        seed=context.next_seed(),
        ard_num_dims=base.ard_num_dims,
        batch_shape=base.batch_shape,
        active_dims=active_dims,
    )
    result = tie(additive, base, "raw_lengthscale")
    for scale in reversed(scales):
        result = scale_like(result, scale)
    return result
