r"""The posterior mean of an indefinite-kernel model: Krein-space kernel ridge regression, never a covariance."""

from __future__ import annotations

import torch
from gpytorch import settings
from gpytorch.kernels import Kernel
from linear_operator.operators import DiagLinearOperator, ZeroLinearOperator
from torch import Tensor

from gprf.linalg import IndefinitePosteriorCovariance, indefinite_error
from gprf.prediction.refresh import RefreshingPredictionStrategy


class SignedPredictionStrategy(RefreshingPredictionStrategy):
    r"""Posterior mean of an indefinite-kernel model (Krein-space kernel ridge regression), no covariance.

    The mean is GPyTorch's :math:`\mu_* + K_{*X}(\hat K + \Sigma)^{-1}(y - \mu)`, with the solve done by the
    Woodbury identity on the signed root (:class:`~gprf.linalg.SignedRootAddedDiagLinearOperator`,
    :math:`O(NF^2)`, float64). The predictive covariance is an
    :class:`~gprf.linalg.IndefinitePosteriorCovariance` that raises when used (or a zero operator
    under ``gpytorch.settings.skip_posterior_variances``); fantasies raise. The mean cache follows the model
    (:class:`~gprf.prediction.refresh.RefreshingPredictionStrategy`): after ``resample_features()`` or a
    hyperparameter change it is rebuilt.
    """

    def exact_prediction(self, test_mean, test_test_covar, test_train_covar):
        self.refresh_if_stale()
        return super().exact_prediction(test_mean, test_test_covar, test_train_covar)

    def exact_predictive_covar(self, test_test_covar, test_train_covar):
        shape = test_test_covar.shape
        if settings.skip_posterior_variances.on():
            return ZeroLinearOperator(*shape, dtype=test_test_covar.dtype, device=test_test_covar.device)
        reference = torch.zeros(shape[:-1], dtype=test_test_covar.dtype, device=test_test_covar.device)
        return IndefinitePosteriorCovariance(reference)

    def get_fantasy_strategy(self, *args, **kwargs):
        raise indefinite_error("Conditioning on fantasy observations (a posterior covariance)")


def krein_ridge_mean(kernel: Kernel, train_x: Tensor, train_y: Tensor, test_x: Tensor, noise: float | Tensor) -> Tensor:
    r"""Kernel ridge regression with an indefinite kernel: :math:`k(x_*, X)(K + \sigma^2 I)^{-1}y`.

    ``kernel`` is a :class:`~gprf.kernels.SignedRandomFeatureKernel` (solved by the Woodbury identity on its signed root
    in :math:`O(NF^2)`), an exact indefinite target (:class:`~gprf.kernels.exact.DeltaGaussianKernel`,
    :class:`~gprf.kernels.exact.SphericalPolynomialKernel`: dense LU), either possibly inside a ``ScaleKernel``.
    ``noise`` is :math:`\sigma^2` (scalar or per training point). The same numbers as ``model(test_x).mean`` of an
    ``ExactGP`` with zero mean and a Gaussian likelihood.
    """
    noise = torch.as_tensor(noise, dtype=train_x.dtype, device=train_x.device)
    if bool((noise <= 0).any()):
        raise ValueError("noise must be positive (the ridge parameter sigma^2).")
    train_covar = kernel(train_x).evaluate_kernel()
    system = train_covar + DiagLinearOperator(noise.expand(train_covar.shape[:-1]))
    weights = system.solve(train_y.unsqueeze(-1))
    return (kernel(test_x, train_x).evaluate_kernel() @ weights).squeeze(-1)
