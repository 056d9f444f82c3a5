r"""Feature-space (weight-space) prediction for GPs whose kernel is a low-rank feature root.

With :math:`K = \Phi\Phi^\top`, :math:`\Phi = \sqrt s\,R` (:math:`R\in\mathbb R^{N\times F}` the root,
:math:`s` the ScaleKernel outputscale, kept apart) and Gaussian noise :math:`\Sigma = \mathrm{diag}(\sigma_i^2)`,
the GP is the Bayesian linear model :math:`f(x) = \phi(x)^\top w`, :math:`w\sim N(0, I_F)`, whose posterior is

.. math::
    w \mid y \sim N\big(C^{-1}\Phi^\top\Sigma^{-1}(y - \mu),\; C^{-1}\big), \qquad C = I + \Phi^\top\Sigma^{-1}\Phi,

so the predictive mean is :math:`\mu(x_*) + \phi_*^\top C^{-1}\Phi^\top\Sigma^{-1}(y-\mu)` and the predictive
covariance is :math:`\phi_*^\top C^{-1}\phi_* = (L^{-1}\phi_*)^\top(L^{-1}\phi_*)` — identical to the
function-space formulas by the Woodbury identity, at :math:`O(NF^2)` once and :math:`O(MF^2)` per
prediction. :math:`C` comes from :func:`gprf.linalg.factor_capacitance`, formed and factored in
:class:`gprf.settings.factor_dtype` (float64 by default) whatever the model dtype.

With fewer points than features the same posterior is cheaper from the :math:`N\times N` side (the *points*
route, :func:`gprf.linalg.choose_route`): with :math:`K = \tilde\Phi\tilde\Phi^\top + \Sigma = LL^\top`,
:math:`\tilde\Phi = \sqrt s\,R` and :math:`B = L^{-1}\tilde\Phi`, the push-through identity gives the weight
posterior mean :math:`C^{-1}\tilde\Phi^\top\Sigma^{-1}(y-\mu) = B^\top L^{-1}(y-\mu)` and Woodbury
:math:`C^{-1} = I - B^\top B`, so the predictive covariance is
:math:`\tilde\phi_*^\top\tilde\phi_* - (B\tilde\phi_*)^\top(B\tilde\phi_*)`: :math:`O(N^2F + N^3)` once and
:math:`O(MNF + MN^2)` per prediction.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import ClassVar

import torch
from gpytorch import settings
from gpytorch.distributions import MultitaskMultivariateNormal
from gpytorch.utils.memoize import add_to_cache, cached, clear_cache_hook
from linear_operator.operators import (
    BatchRepeatLinearOperator,
    DenseLinearOperator,
    LinearOperator,
    LowRankRootLinearOperator,
    ZeroLinearOperator,
)
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from gprf.exceptions import DispatchFallbackWarning
from gprf.linalg import CapacitanceFactor, FeatureRoot, choose_route, factor_points, feature_root
from gprf.linalg.capacitance import fold_leading_batch, solve_triangular
from gprf.prediction.refresh import RefreshingPredictionStrategy
from gprf.settings import factor_dtype


@dataclass(frozen=True)
class WeightSpacePosterior:
    r"""Posterior of the feature weights: :math:`N(C^{-1}b, C^{-1})` with :math:`b = \Phi^\top\Sigma^{-1}(y-\mu)`."""

    factor: CapacitanceFactor
    rhs: Tensor  # b, shape (..., F)
    mean: Tensor  # C^{-1} b, shape (..., F)
    feature_versions: tuple[int, ...] = ()  # draw versions of the kernel's feature maps when it was built


@dataclass(frozen=True)
class PointsSpacePosterior:
    r"""The same weight posterior from the :math:`N\times N` side (module docstring), in blocks of rows — the training
    points, then each set of fantasy points conditioned on — so that a fantasy adds a block instead of refactoring:
    the blocks :math:`B_j` of :math:`B = L^{-1}\tilde\Phi` ``(..., n_j, F)`` and :math:`z_j` of
    :math:`z = L^{-1}(y - \mu)` ``(..., n_j)``, and the posterior mean of the weights :math:`B^\top z`."""

    whitened_features: tuple[Tensor, ...]
    whitened_targets: tuple[Tensor, ...]
    mean: Tensor  # shape (..., F)
    feature_versions: tuple[int, ...] = ()

    def update(self, features: Tensor, noise: Tensor, residual: Tensor) -> PointsSpacePosterior:
        r"""The posterior after :math:`m` more observations: scaled features :math:`\tilde\Phi_f` ``(..., m, F)``, noise
        variances ``(..., m)`` and residuals :math:`r_f` ``(..., m)`` (in the factor dtype).

        The Cholesky factor of the grown covariance is :math:`\begin{pmatrix} L & 0\\ S & L_f\end{pmatrix}` with
        :math:`S = \tilde\Phi_f B^\top` and :math:`L_fL_f^\top = \tilde\Phi_f\tilde\Phi_f^\top + \Sigma_f - SS^\top`,
        so the new blocks are :math:`B_f = L_f^{-1}(\tilde\Phi_f - SB)` and :math:`z_f = L_f^{-1}(r_f - Sz)`:
        :math:`O(mNF + m^2F + m^3)`, nothing of size :math:`N^2` or :math:`F^2`.
        """
        cross = [features @ block.mT for block in self.whitened_features]  # S by blocks, (..., m, n_j)
        schur = features @ features.mT + torch.diag_embed(noise) - sum(s @ s.mT for s in cross)
        cholesky = psd_safe_cholesky(schur)
        projected = sum(s @ block for s, block in zip(cross, self.whitened_features, strict=True))
        explained = sum((s @ z.unsqueeze(-1)).squeeze(-1) for s, z in zip(cross, self.whitened_targets, strict=True))
        whitened = solve_triangular(cholesky, features - projected, upper=False)
        targets = solve_triangular(cholesky, (residual - explained).unsqueeze(-1), upper=False).squeeze(-1)
        mean = self.mean + (whitened.mT @ targets.unsqueeze(-1)).squeeze(-1)
        return PointsSpacePosterior(
            (*self.whitened_features, whitened), (*self.whitened_targets, targets), mean, self.feature_versions
        )


def _solve_vector(factor: CapacitanceFactor, rhs: Tensor) -> Tensor:
    return factor.solve(rhs.unsqueeze(-1)).squeeze(-1)


class FeatureSpacePredictionStrategy(RefreshingPredictionStrategy):
    r"""GPyTorch prediction strategy of every gprf random-feature kernel (see the module docstring).

    Reads the training and test covariances through :func:`gprf.linalg.feature_root`. Honours
    ``gpytorch.settings.skip_posterior_variances`` and ``detach_test_caches``; heteroscedastic and batched
    Gaussian noise; fantasies (``get_fantasy_model``, BoTorch ``fantasize`` and ``condition_on_observations``)
    by a rank-``m`` update of the capacitance factor (:class:`~gprf.linalg.CapacitanceFactor`) or, in the points
    route, a new block of the :math:`N\times N` Cholesky factor (:meth:`PointsSpacePosterior.update`), never a
    refactorisation. Each prediction takes the cheaper route (:meth:`prediction_route`). The training cache follows
    the model: a hyperparameter or feature draw changed after it was built is picked up at the next prediction
    (:class:`~gprf.prediction.refresh.RefreshingPredictionStrategy`). When the covariances it receives are not
    feature roots (e.g. a random-feature kernel added to a dense kernel) it warns with
    :class:`~gprf.exceptions.DispatchFallbackWarning` and uses GPyTorch's default strategy.
    """

    #: Whether predictions may take the points route (real features; subclasses with other features switch it off).
    points_route: ClassVar[bool] = True

    def __init__(self, train_inputs, train_prior_dist, train_labels, likelihood, root=None, inv_root=None) -> None:
        super().__init__(train_inputs, train_prior_dist, train_labels, likelihood, root=root, inv_root=inv_root)
        # Fantasy strategies carry their parent's posterior, updated, and keep its route.
        self._fixed_route: str | None = None

    #: Whether the training cache is the weight posterior of the root itself, so a posterior formed elsewhere from
    #: the same rows can stand in for it (:meth:`adopt_posterior`); strategies that factor other features of the
    #: rows (complex features, re-centred roots) say no.
    adopts_root_posterior: ClassVar[bool] = True
    _adopted: WeightSpacePosterior | None = None

    def adopt_posterior(self, posterior: WeightSpacePosterior) -> bool:
        r"""Use ``posterior`` as the training cache instead of forming :math:`\Phi^\top\Sigma^{-1}\Phi` again;
        returns whether this strategy takes it (:attr:`adopts_root_posterior`).

        ``posterior`` must be the one this strategy would build now, from the same rows, hyperparameters and feature
        draws (:func:`gprf.fit_mll` hands over the one its exact refit formed). It carries no autograd graph, so it is
        used by a prediction under GPyTorch's default ``detach_test_caches``; otherwise, and once the kernel or the
        likelihood changed after this strategy was built
        (:meth:`~gprf.prediction.refresh.RefreshingPredictionStrategy.refresh_if_stale`), the strategy builds its own.
        """
        if not self.adopts_root_posterior:
            return False
        self._adopted = posterior
        return True

    def _forget_caches(self) -> None:
        self._adopted = None
        super()._forget_caches()

    def _weight_features(self, root: FeatureRoot) -> Tensor:
        """The features of the weight-space model (without the amplitude), in the factor dtype."""
        return root.features.to(factor_dtype.value())

    def _training_features(self, root: FeatureRoot) -> Tensor | None:
        """The features the training cache factors: ``None`` for the root as it is (in the model dtype, and never
        formed when it is lazy). The factorisation forms the Gram with products in the factor dtype unless the model
        dtype's own are known to be accurate (:func:`gprf.linalg.factor_capacitance`), casting row chunks in turn,
        so a float32 model does not pay for an :math:`N\times F` float64 copy."""
        return None

    def _like(self, **kwargs) -> FeatureSpacePredictionStrategy:
        """A strategy of the same kind for other training data (fantasies)."""
        return self.__class__(**kwargs)

    @staticmethod
    def _check_features_unchanged(root: FeatureRoot, posterior: WeightSpacePosterior | PointsSpacePosterior) -> None:
        if root.versions != posterior.feature_versions:
            raise RuntimeError(
                "The random features changed (resample_features() or load_state_dict()) after this model's "
                "prediction caches were built (a fantasy model keeps the caches it was made with); call "
                "model.train() and then model.eval() to rebuild them."
            )

    # ------------------------------------------------------------------ training-set cache
    @property
    @cached(name="weight_space_posterior")
    def weight_space_posterior(self) -> WeightSpacePosterior | None:
        """The weight posterior, or ``None`` when the training covariance is not a feature root plus noise."""
        adopted, self._adopted = self._adopted, None
        if adopted is not None and settings.detach_test_caches.on():
            return adopted
        train = feature_root(self.lik_train_train_covar)
        if train is None or train.noise is None:
            return None
        with torch.no_grad() if settings.detach_test_caches.on() else torch.enable_grad():
            residual = self.train_labels - self.train_prior_dist.mean
            factor, rhs = train.factor(residual.unsqueeze(-1), features=self._training_features(train))
            rhs = rhs.squeeze(-1)
            posterior = WeightSpacePosterior(factor, rhs, _solve_vector(factor, rhs), train.versions)
        self._clear_after_backward(posterior.mean)
        return posterior

    @property
    @cached(name="points_space_posterior")
    def points_space_posterior(self) -> PointsSpacePosterior | None:
        """The weight posterior of the points route, or ``None`` when the training covariance is not a feature root
        plus noise."""
        train = feature_root(self.lik_train_train_covar)
        if train is None or train.noise is None:
            return None
        with torch.no_grad() if settings.detach_test_caches.on() else torch.enable_grad():
            residual = (self.train_labels - self.train_prior_dist.mean).unsqueeze(-1)
            factor = factor_points(train, residual)
            whitened = factor.whiten(factor.features)
            targets = factor.whiten(residual.to(whitened.dtype))
            mean = (whitened.mT @ targets).squeeze(-1)
            posterior = PointsSpacePosterior((whitened,), (targets.squeeze(-1),), mean, train.versions)
        self._clear_after_backward(posterior.mean)
        return posterior

    def _clear_after_backward(self, cache: Tensor) -> None:
        """Drop the caches after a backward pass through ``cache`` (one with a graph), as GPyTorch does for its own."""
        if cache.grad_fn is not None:
            wrapper = functools.partial(clear_cache_hook, self)
            functools.update_wrapper(wrapper, clear_cache_hook)
            cache.grad_fn.register_hook(wrapper)

    def prediction_route(self, num_test: int, num_columns: int) -> str:
        """The route of a prediction at ``num_test`` points with a root of ``num_columns`` columns
        (:func:`gprf.linalg.choose_route`)."""
        if self._fixed_route is not None:
            return self._fixed_route
        if not self.points_route:
            return "features"
        batch_shape = self.train_prior_dist.batch_shape
        return choose_route("prediction", self.num_train, num_columns, batch_shape, num_test=num_test)

    def _fallback(self, reason: str) -> None:
        warnings.warn(
            f"gprf's feature-space prediction cannot be used ({reason}); falling back to GPyTorch's dense "
            "O(N^3) prediction strategy. Keep random-feature kernels alone or inside ScaleKernel / gprf "
            "feature sums, with a Gaussian likelihood.",
            DispatchFallbackWarning,
            stacklevel=3,
        )

    # ------------------------------------------------------------------ prediction
    def exact_prediction(
        self, test_mean: Tensor, test_test_covar: LinearOperator, test_train_covar: LinearOperator
    ) -> tuple[Tensor, LinearOperator]:
        self.refresh_if_stale()
        test = feature_root(test_test_covar)
        route = None if test is None else self.prediction_route(test.num_points, test.num_columns)
        posterior = self.points_space_posterior if route == "points" else self.weight_space_posterior
        if posterior is None or test is None:
            self._fallback("the covariances are not random-feature roots")
            return super().exact_prediction(test_mean, test_test_covar, test_train_covar)
        self._check_features_unchanged(test, posterior)

        dtype = test.features.dtype
        phi = self._weight_features(test)
        mean = test.scale_rows((phi @ posterior.mean.unsqueeze(-1)).squeeze(-1).real, 1)
        mean = mean.to(dtype) + test_mean
        if settings.skip_posterior_variances.on():
            return mean, ZeroLinearOperator(*test_test_covar.shape, dtype=dtype, device=mean.device)
        if route == "points":
            return mean, DenseLinearOperator(_points_covariance(posterior, test.scale_rows(phi)).to(dtype))
        # phi C^-1 phi^H = B^H B with B = G^-1 phi^H; Re(B^H B) has the real root [Re B^H, Im B^H].
        covar_root = posterior.factor.solve_root(phi.mH).mH
        if covar_root.is_complex():
            covar_root = torch.cat([covar_root.real, covar_root.imag], dim=-1)
        covar_root = test.scale_rows(covar_root).to(dtype)
        num_test, rank = covar_root.shape[-2:]
        if num_test <= rank:
            # A full-rank M x M matrix keeps sampling with M base samples (BoTorch) working.
            return mean, DenseLinearOperator(covar_root @ covar_root.mT)
        return mean, LowRankRootLinearOperator(covar_root)

    # ------------------------------------------------------------------ fantasies
    def _fantasy_route(self, num_fantasy_points: int) -> str:
        """The route of a fantasy model: this strategy's own if it is one, else the route of a prediction at one point
        (what qKG asks of each fantasy) from the training and fantasy points (:func:`gprf.linalg.choose_route`)."""
        if self._fixed_route is not None:
            return self._fixed_route
        if not self.points_route:
            return "features"
        train = feature_root(self.lik_train_train_covar)
        if train is None:
            return "features"  # the caller falls back loudly
        num_points = self.num_train + num_fantasy_points
        return choose_route("prediction", num_points, train.num_columns, self.train_prior_dist.batch_shape, num_test=1)

    @staticmethod
    def _updated_weight_posterior(
        posterior: WeightSpacePosterior, fantasy: FeatureRoot, fant_phi: Tensor, residual: Tensor
    ) -> WeightSpacePosterior:
        """The weight posterior after the fantasy observations (a rank-``m`` update of the capacitance factor)."""
        # With Phi_f = sqrt(s) R_f: b += Phi_f^H Sigma_f^-1 r_f and C += U U^H, U = Phi_f^H Sigma_f^-1/2.
        noise = fantasy.noise.to(fant_phi.real.dtype).expand(*fant_phi.shape[:-1])
        weighted = fantasy.scale_rows(fant_phi / noise.unsqueeze(-1))
        rhs = posterior.rhs + (weighted.mH @ residual.to(fant_phi.dtype).unsqueeze(-1)).squeeze(-1)
        factor = posterior.factor.update((weighted * noise.sqrt().unsqueeze(-1)).mH)
        return WeightSpacePosterior(factor, rhs, _solve_vector(factor, rhs), posterior.feature_versions)

    def get_fantasy_strategy(self, inputs, targets, full_inputs, full_targets, full_output, **kwargs):
        self.refresh_if_stale()
        route = self._fantasy_route(inputs[0].size(-2))
        posterior = self.points_space_posterior if route == "points" else self.weight_space_posterior
        if posterior is None or isinstance(full_output, MultitaskMultivariateNormal):
            self._fallback("fantasies need a single-output model with a random-feature root")
            return super().get_fantasy_strategy(inputs, targets, full_inputs, full_targets, full_output, **kwargs)

        num_train = self.num_train
        batch_shape = full_inputs[0].shape[:-2]
        full_mean = full_output.mean.view(*batch_shape, -1)
        full_covar = full_output.lazy_covariance_matrix
        fant_mean = full_mean[..., num_train:]
        fant_covar = full_covar[..., num_train:, num_train:]
        fant_likelihood = self.likelihood.get_fantasy_likelihood(**kwargs)
        observed = fant_likelihood(self.train_prior_dist.__class__(fant_mean, fant_covar), inputs, **kwargs)
        fantasy = feature_root(observed.lazy_covariance_matrix)
        if fantasy is None or fantasy.noise is None:
            self._fallback("the fantasy covariances are not random-feature roots")
            return super().get_fantasy_strategy(inputs, targets, full_inputs, full_targets, full_output, **kwargs)
        self._check_features_unchanged(fantasy, posterior)

        with torch.no_grad() if settings.detach_test_caches.on() else torch.enable_grad():
            fant_phi = self._weight_features(fantasy)
            if route == "points":
                noise = fantasy.noise.to(fant_phi.dtype).expand(*fant_phi.shape[:-1])
                residual = (targets - fant_mean).to(fant_phi.dtype)
                new_posterior = posterior.update(fantasy.scale_rows(fant_phi), noise, residual)
            else:
                new_posterior = self._updated_weight_posterior(posterior, fantasy, fant_phi, targets - fant_mean)

        if full_inputs[0].dim() <= full_targets.dim():
            # Fantasies at shared inputs: repeat the inputs over the leading fantasy dimension.
            fant_batch_shape = full_targets.shape[:1]
            repeat_shape = fant_batch_shape + torch.Size([1] * len(full_mean.shape[:-1]))
            full_inputs = [fi.expand(fant_batch_shape + fi.shape) for fi in full_inputs]
            full_mean = full_mean.expand(fant_batch_shape + full_mean.shape)
            full_covar = BatchRepeatLinearOperator(full_covar, repeat_shape)

        fant_strategy = self._like(
            train_inputs=full_inputs,
            train_prior_dist=self.train_prior_dist.__class__(full_mean, full_covar),
            train_labels=full_targets,
            likelihood=fant_likelihood,
        )
        add_to_cache(fant_strategy, f"{'points' if route == 'points' else 'weight'}_space_posterior", new_posterior)
        fant_strategy._fixed_route = route  # its cache is the updated posterior of that route
        fant_strategy.stop_following()  # built on this model's modules; the fantasy model holds copies of them
        return fant_strategy


def _points_covariance(posterior: PointsSpacePosterior, scaled_phi: Tensor) -> Tensor:
    r""":math:`\tilde\phi_*\tilde\phi_*^\top - \sum_j (B_j\tilde\phi_*^\top)^\top(B_j\tilde\phi_*^\top)` ``(..., M, M)``
    for scaled test features :math:`\tilde\phi_*` ``(..., M, F)`` in the factor dtype (module docstring)."""
    covariance = scaled_phi @ scaled_phi.mT
    for block in posterior.whitened_features:
        whitened = fold_leading_batch(torch.matmul, block, scaled_phi.mT)  # (..., n_j, M)
        covariance = covariance - whitened.mT @ whitened
    return (covariance + covariance.mT) / 2  # symmetric to rounding
