r"""The one decoder of the feature-root hand-off: whatever covariance GPyTorch hands around, its
:class:`~gprf.linalg.FeatureRoot` or ``None``."""

from __future__ import annotations

from linear_operator.operators import LinearOperator

from gprf.linalg.feature_root import FeatureRoot
from gprf.linalg.feature_root_added_diag_operator import FeatureRootAddedDiagLinearOperator
from gprf.linalg.feature_root_operator import FeatureRootLinearOperator

_FEATURE_ROOT_OPERATORS = (FeatureRootLinearOperator, FeatureRootAddedDiagLinearOperator)


def feature_root(covariance: object) -> FeatureRoot | None:
    r"""The :class:`~gprf.linalg.FeatureRoot` behind ``covariance``, or ``None`` when it has none.

    Accepts what GPyTorch produces from a gprf feature kernel, alone or inside ``ScaleKernel``: the lazily
    evaluated kernel tensor (``covar_module(x)``), the evaluated :class:`~gprf.linalg.FeatureRootLinearOperator`,
    and either plus a Gaussian likelihood's noise (``likelihood(model(x)).lazy_covariance_matrix``; the root then
    carries the noise variances). Anything else — a dense kernel, a feature kernel added to a dense one — gives
    ``None``, so callers can fall back loudly.
    """
    if isinstance(covariance, LinearOperator) and not isinstance(covariance, _FEATURE_ROOT_OPERATORS):
        # Evaluating a lazily evaluated kernel is cached by GPyTorch; other operators are rebuilt from their parts.
        covariance = covariance.evaluate_kernel()
    if isinstance(covariance, _FEATURE_ROOT_OPERATORS):
        return covariance.feature_root
    return None
