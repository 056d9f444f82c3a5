r"""Exact-GP prediction for :class:`~gprf.kernels.PreconditionedKernel`: the training covariance's preconditioner
(random features or Nyström points of the same kernel) serves the mean solve and the fast predictive variances."""

from __future__ import annotations

import functools

from gpytorch import settings
from gpytorch.models.exact_prediction_strategies import DefaultPredictionStrategy
from gpytorch.utils.memoize import cached, clear_cache_hook
from linear_operator import settings as linop_settings
from linear_operator import to_dense
from linear_operator.operators import AddedDiagLinearOperator, LinearOperator, to_linear_operator
from torch import Tensor

from gprf.linalg.preconditioned_added_diag_operator import PreconditionedAddedDiagLinearOperator
from gprf.linalg.ritz_inverse import ritz_inverse_root

#: Default relative residual of a :class:`~gprf.kernels.PreconditionedKernel` prediction's mean solve (the smaller
#: of it and GPyTorch's ``eval_cg_tolerance`` applies): a tenth of GPyTorch's 0.01, at which the solve's error is
#: still visible in the test RMSE, while the kernel's preconditioner keeps the extra iterations few.
PREDICTION_TOLERANCE = 1e-3


def _solves_by_cg() -> linop_settings.fast_computations:
    """linear_operator's solves by (preconditioned) conjugate gradients above ``max_cholesky_size`` — its default,
    which BoTorch switches off on import — the other fast-computation flags as they are."""
    return linop_settings.fast_computations(
        covar_root_decomposition=linop_settings.fast_computations.covar_root_decomposition.on(),
        log_prob=linop_settings.fast_computations.log_prob.on(),
        solves=True,
    )


class PreconditionedPredictionStrategy(DefaultPredictionStrategy):
    r"""GPyTorch's exact prediction strategy, with every solve against the training covariance
    :math:`\hat K = K + \Sigma` preconditioned by :math:`P = \Sigma + s\,\Phi\Phi^\top` (:math:`\Phi` random features or
    Nyström points of the same kernel).

    One evaluated training covariance (:class:`~gprf.linalg.PreconditionedAddedDiagLinearOperator`) and its one
    preconditioner :math:`P` serve

    * the mean cache :math:`\hat K^{-1}(y - \mu)`, by preconditioned conjugate gradients (to the smaller of
      ``tolerance`` and ``gpytorch.settings.eval_cg_tolerance``) above ``max_cholesky_size`` whatever
      linear_operator's fast-solve flag says (BoTorch switches it off on import; a dense factorisation is what the
      kernel exists to avoid), and by Cholesky at or below it;
    * predictive covariances without ``fast_pred_var``: :math:`k_{**} - k_*^\top\hat K^{-1}k_*` by the same solves;
    * with ``gpytorch.settings.fast_pred_var()``: GPyTorch's LOVE cache (a root :math:`R`, :math:`RR^\top \approx
      \hat K^{-1}`, reused for every test point) is the Rayleigh–Ritz inverse on the preconditioner's feature
      subspace :math:`\mathrm{span}(\Sigma^{-1}\Phi)` (:func:`gprf.linalg.ritz_inverse_root`) instead of a
      Lanczos subspace: where :math:`\Phi\Phi^\top` captures :math:`K`, :math:`\hat K^{-1}k_*` lies near it (it lies
      in it for :math:`K = s\Phi\Phi^\top`, by the Woodbury identity), and the variances are never below the exact
      ones. It costs one product of the kernel with :math:`F` columns; at or below ``max_cholesky_size`` GPyTorch's
      Cholesky cache is used.

    Raises ``TypeError`` when the likelihood does not add a diagonal Gaussian noise to the kernel (the preconditioner
    includes that noise). Strategies of fantasy models (``get_fantasy_model``, BoTorch's ``fantasize``), whose
    training covariance GPyTorch builds around the kernel's, are GPyTorch's own.
    """

    #: Relative residual of the mean solve (the smaller of it and ``eval_cg_tolerance`` applies; ``None``: the latter
    #: alone); the kernel sets its ``prediction_tolerance`` here.
    tolerance: float | None = PREDICTION_TOLERANCE

    def __init__(self, train_inputs, train_prior_dist, train_labels, likelihood, root=None, inv_root=None) -> None:
        covariance = getattr(likelihood(train_prior_dist, train_inputs), "lazy_covariance_matrix", None)
        if not isinstance(covariance, AddedDiagLinearOperator):
            raise TypeError(
                "PreconditionedKernel needs a Gaussian likelihood whose noise is a diagonal (GaussianLikelihood, "
                f"FixedNoiseGaussianLikelihood), which its preconditioner includes; {type(likelihood).__name__} does "
                "not add one. Use such a likelihood, or the exact kernel (PreconditionedKernel.base_kernel) with this "
                "one."
            )
        super().__init__(train_inputs, train_prior_dist, train_labels, likelihood, root, inv_root)
        covariance = covariance.evaluate_kernel()
        # None: a covariance built by GPyTorch around the kernel's (the batch-repeated one of a fantasy model), which
        # GPyTorch's own solves serve.
        self.train_covariance = covariance if isinstance(covariance, PreconditionedAddedDiagLinearOperator) else None

    def _solve(self, rhs: Tensor) -> Tensor:
        r""":math:`\hat K^{-1}\,\text{rhs}`, detached from both when ``detach_test_caches`` is on (GPyTorch's
        default)."""
        covariance = self.train_covariance
        if settings.detach_test_caches.on():
            covariance, rhs = covariance.detach(), rhs.detach()
        tolerance = linop_settings.cg_tolerance.value()  # GPyTorch sets it to eval_cg_tolerance for predictions
        if self.tolerance is not None:
            tolerance = min(tolerance, self.tolerance)
        with _solves_by_cg(), linop_settings.cg_tolerance(tolerance):
            return covariance.solve(rhs)

    def _inverse_quadratic(self, left: Tensor) -> Tensor:
        r""":math:`A\hat K^{-1}A^\top` for ``left`` :math:`A` ``(..., M, N)``, differentiable in :math:`A`.

        With ``detach_test_caches`` on, :math:`S = \hat K^{-1}A^\top` is solved once without a graph and
        :math:`AS + S^\top A^\top - \mathrm{sym}(AS)` (value :math:`\mathrm{sym}(AS)`) carries the exact gradient
        :math:`\mathrm dA\,S + S^\top\mathrm dA^\top`: no second solve in the backward pass, which linear_operator
        would run outside the conjugate-gradient setting.
        """
        product = left @ self._solve(left.mT)
        if settings.detach_test_caches.off():
            return product
        symmetric = (product + product.mT) / 2
        return product + product.mT - symmetric.detach()

    def _register_clear_hook(self, cache: Tensor) -> Tensor:
        if cache.grad_fn is not None:  # as GPyTorch: a backward pass through the cache invalidates it
            wrapper = functools.partial(clear_cache_hook, self)
            functools.update_wrapper(wrapper, clear_cache_hook)
            cache.grad_fn.register_hook(wrapper)
        return cache

    @cached(name="mean_cache")
    def _mean_cache(self, nan_policy: str) -> Tensor:
        if nan_policy != "ignore" or self.train_covariance is None:  # masked or filled observations: GPyTorch's route
            return super()._mean_cache(nan_policy)
        offset = (self.train_labels - self.train_prior_dist.loc).unsqueeze(-1)
        return self._register_clear_hook(self._solve(offset).squeeze(-1))

    @property
    @cached(name="covar_cache")
    def covar_cache(self) -> Tensor:
        covariance = self.train_covariance
        if covariance is None or covariance.size(-1) <= linop_settings.max_cholesky_size.value():
            return super().covar_cache
        if settings.detach_test_caches.on():
            covariance = covariance.detach()
        root = ritz_inverse_root(covariance, covariance.preconditioner.weighted_features())
        return self._exact_predictive_covar_inv_quad_form_cache(root, self._last_test_train_covar)

    def exact_predictive_covar(self, test_test_covar: LinearOperator, test_train_covar: LinearOperator):
        if settings.fast_pred_var.on() or settings.skip_posterior_variances.on() or self.train_covariance is None:
            return super().exact_predictive_covar(test_test_covar, test_train_covar)
        correction = self._inverse_quadratic(to_dense(test_train_covar))
        return to_linear_operator(test_test_covar) - correction
