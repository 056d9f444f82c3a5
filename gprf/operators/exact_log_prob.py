r"""Keep the exact feature-space log density when linear_operator's "fast" log_prob is switched off.

GPyTorch's :meth:`MultivariateNormal.log_prob` consults ``linear_operator.settings.fast_computations.log_prob``
*before* looking at the covariance: when the flag is off it calls torch's dense implementation, an
:math:`N\times N` Cholesky. BoTorch switches the flag off globally on import, because for dense kernels
the "fast" path is approximate (CG/Lanczos). For a feature-root covariance :math:`RR^\top + \Sigma` the
structured path (:class:`~gprf.operators.FeatureRootAddedDiagLinearOperator`: Woodbury identity and the
matrix determinant lemma) is exact, so gprf takes it whatever the flag says — only for gprf covariances;
every other model keeps GPyTorch's behaviour.
"""

from __future__ import annotations

import functools

from gpytorch.distributions import MultivariateNormal
from linear_operator import settings as linop_settings
from linear_operator.operators import LinearOperator

from gprf.operators.feature_root import FeatureRootAddedDiagLinearOperator
from gprf.operators.signed import IndefiniteGuard

# Operators whose own inv_quad_logdet is exact (feature roots) or raises a clear error (indefinite kernels,
# which must not reach torch's dense Cholesky and its generic "not PSD" error).
_STRUCTURED = (FeatureRootAddedDiagLinearOperator, IndefiniteGuard)


def _is_feature_root_density(covariance: object) -> bool:
    if not isinstance(covariance, LinearOperator):
        return False
    if isinstance(covariance, _STRUCTURED):
        return True
    # Lazily evaluated kernels plus noise: evaluating is cached by GPyTorch, so log_prob does not redo it.
    return isinstance(covariance.evaluate_kernel(), _STRUCTURED)


def install() -> None:
    """Wrap ``gpytorch.distributions.MultivariateNormal.log_prob`` once (idempotent)."""
    original = MultivariateNormal.log_prob
    if getattr(original, "_gprf_exact_feature_path", False):
        return

    @functools.wraps(original)
    def log_prob(self: MultivariateNormal, value):
        if linop_settings.fast_computations.log_prob.off() and self.islazy:
            if _is_feature_root_density(self.lazy_covariance_matrix):
                with linop_settings._fast_log_prob(True):
                    return original(self, value)
        return original(self, value)

    log_prob._gprf_exact_feature_path = True
    MultivariateNormal.log_prob = log_prob
