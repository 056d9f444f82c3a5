r"""The one decoder of the feature-root hand-off: whatever covariance GPyTorch hands around, its
:class:`~gprf.linalg.FeatureRoot` or ``None``; and :func:`~gprf.linalg.covariance_root`, a module evaluated and
decoded."""

from __future__ import annotations

from collections.abc import Callable

from linear_operator.operators import LinearOperator
from torch import Tensor

from gprf.linalg.feature_root import FeatureRoot
from gprf.linalg.feature_root_added_diag_operator import FeatureRootAddedDiagLinearOperator
from gprf.linalg.feature_root_operator import FeatureRootLinearOperator

_FEATURE_ROOT_OPERATORS = (FeatureRootLinearOperator, FeatureRootAddedDiagLinearOperator)


def feature_root(covariance: object) -> FeatureRoot | None:
    r"""The :class:`~gprf.linalg.FeatureRoot` behind ``covariance``, or ``None`` when it has none.

    Accepts what GPyTorch produces from a gprf feature kernel, alone or inside ``ScaleKernel``: the lazily
    evaluated kernel tensor (``covar_module(x)``), the evaluated :class:`~gprf.linalg.FeatureRootLinearOperator`,
    and either plus a Gaussian likelihood's noise (``likelihood(model(x)).lazy_covariance_matrix``; the root then
    carries the noise variances). GPyTorch's sums and products of feature kernels evaluate to one too
    (:mod:`gprf.linalg.root_algebra`). Anything else — a dense kernel, a feature kernel added to a dense one — gives
    ``None``, so callers can fall back loudly.
    """
    if isinstance(covariance, LinearOperator) and not isinstance(covariance, _FEATURE_ROOT_OPERATORS):
        # Evaluating a lazily evaluated kernel is cached by GPyTorch; other operators are rebuilt from their parts.
        covariance = covariance.evaluate_kernel()
    if isinstance(covariance, _FEATURE_ROOT_OPERATORS):
        return covariance.feature_root
    return None


def covariance_root(module: Callable[[Tensor], object], x: Tensor) -> FeatureRoot:
    r"""The :class:`~gprf.linalg.FeatureRoot` of ``module(x)``, for consumers that need one.

    ``module`` is a covariance module evaluated as GPyTorch evaluates it (a kernel's ``active_dims``, lengthscales
    and ``ScaleKernel`` amplitudes included), or anything whose value at ``x`` is a covariance or a Gaussian
    distribution (e.g. a model's ``forward``); its covariance is read by :func:`feature_root`.

    Raises:
        TypeError: ``module(x)`` has no feature root (e.g. a dense GPyTorch kernel, or a feature kernel added to
            one).
    """
    value = module(x)
    root = feature_root(getattr(value, "lazy_covariance_matrix", value))
    if root is None:
        name = getattr(module, "__qualname__", type(module).__name__)
        raise TypeError(
            f"{name} did not evaluate to a feature root; this needs a gprf random-feature kernel (alone, inside "
            "ScaleKernel, or in sums and products of such kernels), not a dense kernel or a sum with one."
        )
    return root
