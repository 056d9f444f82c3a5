r"""A ``MultivariateNormal`` whose log density of a feature-root covariance is always the exact structured one."""

from __future__ import annotations

import math

import gpytorch
import torch
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
        if not isinstance(covariance, LinearOperator):
            return super().log_prob(value)
        # GPyTorch caches the kernel's evaluation, but rebuilds the operator around it (the likelihood's noise) at
        # every evaluate_kernel: the structured density below evaluates it once, where GPyTorch's would again.
        evaluated = covariance.evaluate_kernel()
        if not isinstance(evaluated, _STRUCTURED):
            return super().log_prob(value)
        residual = value - self.loc
        batch_shape = evaluated.batch_shape
        shape = residual.shape[:-1]
        with gpytorch.settings.fast_computations.log_prob(True):  # exact here: the structured density
            if shape == batch_shape:
                columns = residual.unsqueeze(-1)
            else:
                shape = torch.broadcast_shapes(shape, batch_shape)
                extra = len(shape) - len(batch_shape)
                if shape[extra:] != batch_shape:  # the covariance's own batch broadcast: GPyTorch repeats it
                    return super().log_prob(value)
                # Values of more batches than the covariance (e.g. samples): columns of one solve, not its copies.
                expanded = residual.expand(*shape, residual.size(-1))
                columns = expanded.reshape(-1, *expanded.shape[extra:]).movedim(0, -1)
            inv_quad, logdet = evaluated.inv_quad_logdet(inv_quad_rhs=columns, logdet=True, reduce_inv_quad=False)
        inv_quad = inv_quad.movedim(-1, 0).reshape(shape)
        return -0.5 * (inv_quad + logdet + residual.size(-1) * math.log(2 * math.pi))
