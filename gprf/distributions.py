r"""A ``MultivariateNormal`` whose log density of a feature-root covariance is always the exact structured one."""

from __future__ import annotations

import gpytorch
from gpytorch.distributions import MultivariateNormal as GPyTorchMultivariateNormal
from linear_operator.operators import LinearOperator
from torch import Tensor

from gprf.linalg import FeatureRootAddedDiagLinearOperator, IndefiniteGuard, PreconditionedAddedDiagLinearOperator

# Covariances whose own inv_quad_logdet is exact (feature roots), raises a clear error (indefinite kernel matrices,
# which must not reach torch's dense Cholesky and its generic "not PSD" error), or is preconditioned CG above
# max_cholesky_size and Cholesky below it (an exact kernel preconditioned by its random features).
_STRUCTURED = (FeatureRootAddedDiagLinearOperator, IndefiniteGuard, PreconditionedAddedDiagLinearOperator)


class MultivariateNormal(GPyTorchMultivariateNormal):
    r"""GPyTorch's :class:`~gpytorch.distributions.MultivariateNormal`, with an exact :math:`O(NF^2)` log density
    for gprf feature-root covariances under every setting.

    GPyTorch's ``log_prob`` consults linear_operator's ``fast_computations.log_prob`` flag *before* looking at
    the covariance: with the flag on (GPyTorch's default) it calls the covariance's ``inv_quad_logdet``, which
    for :math:`K = s\,RR^\top + \Sigma` is exact (:class:`~gprf.linalg.FeatureRootAddedDiagLinearOperator`);
    with the flag off — BoTorch switches it off on import, because for dense kernels the fast path is a
    stochastic approximation — it factors the dense :math:`N\times N` matrix. This class takes the structured
    path for gprf covariances whatever the flag says, and behaves exactly as GPyTorch's class for every other
    covariance; for an exact kernel preconditioned by its random features
    (:class:`~gprf.kernels.PreconditionedKernel`) that path is linear_operator's preconditioned conjugate gradients
    above ``max_cholesky_size``. Return it from a model's ``forward`` (likelihoods and predictions keep the class):

    Example:
        >>> def forward(self, x):
        ...     return gprf.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))
    """

    def log_prob(self, value: Tensor) -> Tensor:
        covariance = self.lazy_covariance_matrix
        # GPyTorch caches the evaluation of lazily evaluated kernels, so log_prob does not redo it.
        if isinstance(covariance, LinearOperator) and isinstance(covariance.evaluate_kernel(), _STRUCTURED):
            with gpytorch.settings.fast_computations.log_prob(True):  # exact here: the structured density
                return super().log_prob(value)
        return super().log_prob(value)
