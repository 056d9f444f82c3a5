r"""Which GPyTorch kernel expressions evaluate to a feature root, and how many columns it has.

A gprf feature kernel evaluates to a feature root, alone or inside ``ScaleKernel``; GPyTorch's ``AdditiveKernel`` of
such expressions concatenates their roots, and its ``ProductKernel`` multiplies them (:mod:`gprf.linalg.root_algebra`):
by the product kernel's own features for two roots of known origin (:mod:`gprf.kernels.root_products`), by the exact
Kronecker product when a factor is a task ``IndexKernel`` or has no random draws. :func:`~gprf.kernels.root_columns`
follows the same rules without evaluating the kernel, so consumers that size weights before evaluating (BoTorch's sample
paths) agree with the evaluated root.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpytorch.kernels import AdditiveKernel, IndexKernel, Kernel, ProductKernel, ScaleKernel

from gprf.features.versions import feature_versions
from gprf.kernels.feature_kernel import FeatureKernel
from gprf.kernels.index_root_kernel import is_positive_index_kernel
from gprf.kernels.root_products import product_of


@dataclass(frozen=True)
class _Root:
    """What an expression's covariance root is: the kernel whose features it is (its operator's origin; ``None``
    for concatenations and task products), its columns, and whether it has no random draws."""

    origin: Kernel | None
    columns: int
    exact: bool


def is_task_kernel(kernel: object) -> bool:
    """Whether ``kernel`` is GPyTorch's ``IndexKernel`` or BoTorch's ``PositiveIndexKernel`` (a task covariance that
    the feature root of a product reads exactly)."""
    return isinstance(kernel, IndexKernel) and (type(kernel) is IndexKernel or is_positive_index_kernel(kernel))


def _root(kernel: object) -> _Root | None:
    if isinstance(kernel, ScaleKernel):
        return _root(kernel.base_kernel)
    if isinstance(kernel, FeatureKernel):
        return _Root(kernel, kernel.root_dim, not feature_versions(kernel))
    if isinstance(kernel, AdditiveKernel) and len(kernel.kernels) > 0:
        parts = [_root(part) for part in kernel.kernels]
        if any(part is None for part in parts):
            return None
        return _Root(None, sum(part.columns for part in parts), all(part.exact for part in parts))
    if isinstance(kernel, ProductKernel) and len(kernel.kernels) > 0:
        return _product_root(list(kernel.kernels))
    return None


def _product_root(factors: list[Kernel]) -> _Root | None:
    result = _root(factors[0])
    for factor in factors[1:]:
        if result is None:
            return None
        if is_task_kernel(factor):
            result = _Root(None, result.columns * factor.covar_factor.size(-2), result.exact)
            continue
        other = _root(factor)
        if other is None:
            return None
        exact = result.exact and other.exact
        if result.origin is not None and other.origin is not None:
            product = product_of(result.origin, other.origin)
            result = _Root(product, product.root_dim, exact)
        elif result.exact or other.exact:
            result = _Root(None, result.columns * other.columns, exact)
        else:
            return None
    return result


def is_feature_expression(kernel: object) -> bool:
    """Whether ``kernel`` evaluates to a feature root: a gprf feature kernel, or ``ScaleKernel``, GPyTorch's
    ``AdditiveKernel`` and ``ProductKernel`` of such expressions (a product's factors after the first may be task
    ``IndexKernel``\\ s)."""
    return _root(kernel) is not None


def root_columns(kernel: Kernel) -> int:
    """Columns of the feature root that ``kernel`` (a feature expression, :func:`is_feature_expression`) evaluates
    to; ``TypeError`` for other kernels."""
    root = _root(kernel)
    if root is None:
        raise TypeError(
            f"{type(kernel).__name__} does not evaluate to a feature root; this needs a gprf random-feature kernel, "
            "alone, inside ScaleKernel, or in sums and products of such kernels (a product's later factors may be task "
            "IndexKernels)."
        )
    return root.columns
