r"""Localized prediction for shift-invariant feature kernels (paper 002, §3.2–3.3, Alg. 1; DESIGN.md §3.6).

A shift-invariant kernel satisfies :math:`k(x - c, y - c) = k(x, y)` for every centre :math:`c`, so the exact GP
predictive at :math:`x_*` is unchanged if every input is shifted by :math:`-c`. Its random-feature approximation
is not: a truncated Maclaurin expansion of the Gaussian kernel is exact only near its centre (it vanishes far
from it, paper 002 Thm. 3.1). Predicting at :math:`x_*` with the features re-centred at :math:`c`,

.. math::
    \Phi_c = a\,\Phi(Z - c), \quad \phi_c = a\,\phi(z_* - c), \quad C_c = I + \Phi_c^\top\Sigma^{-1}\Phi_c,

    \mu_* = m(x_*) + \phi_c^\top C_c^{-1}\Phi_c^\top\Sigma^{-1}(y - m(X)), \qquad
    \sigma_*^2 = \phi_c^\top C_c^{-1}\phi_c = \lVert L_c^{-1}\phi_c\rVert^2

(:math:`Z = X/\ell` and :math:`z_* = x_*/\ell` the scaled inputs, :math:`a` the ScaleKernel amplitude,
:math:`\Sigma` the noise, :math:`C_c = L_cL_c^\top` factored in float64), makes :math:`k(x_*, X)` and
:math:`k(x_*, x_*)` exact for :math:`c = z_*`. Far from the data the predictive therefore returns to the prior
(mean :math:`m(x_*)`, variance :math:`a^2`), where the globally centred predictor collapses to zero variance.

* ``centers="test"``: :math:`c = z_*` for every test point, :math:`O(MNF^2)`, computed in chunks of test
  points (one batched :math:`F\times F` factorisation per point).
* ``centers="cluster"`` or given centres: one factor :math:`L_c` per centre, precomputed once
  (:math:`O(N_CNF^2)`); a test point uses its nearest centre, :math:`O(MF^2)`. Clustering is farthest-point
  clustering of the scaled training inputs (:func:`gprf.ops.farthest_point_clustering`). Test points farther
  from their nearest centre than every training point is from its own lie outside the region the centres
  cover; with ``recentre_outside=True`` (default) they are re-centred individually as in ``"test"`` mode, so
  predictions far from the data return to the prior in every mode.

Each test point is predicted by its own (or its centre's) approximate model, so there is no joint predictive
covariance between test points: the predictive covariance is the diagonal of marginal variances.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from gpytorch import settings
from gpytorch.lazy import LazyEvaluatedKernelTensor
from linear_operator.operators import DiagLinearOperator, LinearOperator, ZeroLinearOperator
from torch import Tensor

from gprf.exceptions import DispatchFallbackWarning
from gprf.operators import FeatureRootLinearOperator
from gprf.ops.clustering import farthest_point_clustering, nearest_center
from gprf.prediction.capacitance import CapacitanceFactor
from gprf.prediction.feature_space import FeatureSpacePredictionStrategy, feature_versions
from gprf.prediction.roots import noise_diagonal

_FACTOR_DTYPE = torch.float64
# Elements of the largest (chunk x N x F) feature tensor formed at once when no chunk size is given (128 MiB float64).
_DEFAULT_CHUNK_ELEMENTS = 2**24


class CentredFeatureRootLinearOperator(FeatureRootLinearOperator):
    r""":math:`RR^\top` with :math:`R = a\,\Phi(Z)` that remembers the scaled inputs :math:`Z` and the amplitude
    :math:`a`, so that a localized prediction strategy can recompute the root re-centred at other points.

    Multiplying by a positive constant (what ``ScaleKernel`` does) keeps both; any other operation returns a
    plain root operator without them (the strategy then falls back loudly to the global predictor).
    """

    def __init__(self, root: Tensor | LinearOperator, inputs: Tensor | None = None, amplitude: Tensor | None = None) -> None:
        super().__init__(root)
        self.inputs = inputs
        self.amplitude = amplitude

    def _mul_constant(self, other: float | Tensor) -> LinearOperator:
        result = super()._mul_constant(other)
        if type(result) is type(self) and self.inputs is not None:
            # RootLinearOperator multiplies the root by sqrt(other) when other > 0 (one constant per batch
            # member): track that factor, shaped (*batch, 1, 1) to scale roots.
            amplitude = torch.as_tensor(other, dtype=self.inputs.dtype, device=self.inputs.device).sqrt()
            amplitude = amplitude.reshape(*amplitude.shape, 1, 1)
            result.inputs = self.inputs
            result.amplitude = amplitude if self.amplitude is None else self.amplitude * amplitude
        return result


def _centred_root(covar: object) -> CentredFeatureRootLinearOperator | None:
    """The re-centrable root behind a (lazily evaluated) kernel covariance, or ``None``."""
    if isinstance(covar, LazyEvaluatedKernelTensor):
        # Only the lazy kernel tensor: LinearOperator.evaluate_kernel rebuilds operators and drops the inputs.
        covar = covar.evaluate_kernel()
    if isinstance(covar, CentredFeatureRootLinearOperator) and covar.inputs is not None:
        return covar
    return None


@dataclass(frozen=True)
class LocalPosteriors:
    r"""Float64 weight posteriors re-centred at ``C`` centres: factors of :math:`C_c` and :math:`C_c^{-1}b_c`."""

    centers: Tensor  # (*batch, C, d) scaled centres
    factor: CapacitanceFactor  # cholesky (C, *batch, F, F)
    weights: Tensor  # (C, *batch, F)
    radius: Tensor  # (*batch,) largest distance from a training point to its nearest centre
    feature_versions: tuple[int, ...] = ()


@dataclass(frozen=True)
class _TrainingData:
    inputs: Tensor  # scaled training inputs Z, (*batch, N, d)
    amplitude: Tensor  # a, shape (*batch, 1, 1) or ()
    noise: Tensor  # (*batch, N), float64
    residual: Tensor  # y - m(X), (*batch, N), float64


class LocalizedPredictionStrategy(FeatureSpacePredictionStrategy):
    r"""GPyTorch prediction strategy that re-centres the features near each test point (module docstring).

    Handed out by :class:`~gprf.kernels.LocalizedMaclaurinKernel`; the marginal likelihood is untouched (it
    uses the globally centred kernel). The kernel passes what re-centring needs, so this module never imports
    kernels.

    Args:
        local_features: ``u -> R(u)``, the real root of the feature map evaluated at offsets ``u = z - c``
            (``(..., n, d)``, scaled inputs minus a centre, no further centring).
        centers: ``"test"``, ``"cluster"``, or a tensor ``(*batch, K, d)`` of scaled centres.
        threshold: Clustering threshold :math:`\theta` in scaled units (lengthscales), ``"cluster"`` only.
        max_centers: Cap on the number of clusters, ``"cluster"`` only.
        chunk_size: Centres (test points or clusters) re-centred per batched step; ``None`` bounds the
            ``chunk x N x F`` feature tensor by :math:`2^{24}` elements.
        recentre_outside: Re-centre test points outside the region covered by the centres individually.
    """

    def __init__(
        self,
        train_inputs,
        train_prior_dist,
        train_labels,
        likelihood,
        local_features: Callable[[Tensor], Tensor],
        centers: str | Tensor = "test",
        threshold: float = 1.0,
        max_centers: int = 100,
        chunk_size: int | None = None,
        recentre_outside: bool = True,
        root=None,
        inv_root=None,
    ) -> None:
        super().__init__(train_inputs, train_prior_dist, train_labels, likelihood, root=root, inv_root=inv_root)
        self.local_features = local_features
        self.centers = centers
        self.threshold = threshold
        self.max_centers = max_centers
        self.chunk_size = chunk_size
        self.recentre_outside = recentre_outside

    # ------------------------------------------------------------------ training data
    def _training_data(self) -> _TrainingData | None:
        train_root = _centred_root(self.train_prior_dist.lazy_covariance_matrix)
        noise = noise_diagonal(self.lik_train_train_covar)
        if train_root is None or noise is None:
            return None
        amplitude = train_root.amplitude if train_root.amplitude is not None else train_root.inputs.new_ones(())
        residual = self.train_labels - self.train_prior_dist.mean
        data = _TrainingData(train_root.inputs, amplitude, noise.to(_FACTOR_DTYPE), residual.to(_FACTOR_DTYPE))
        if settings.detach_test_caches.on():
            data = _TrainingData(*(t.detach() for t in (data.inputs, data.amplitude, data.noise, data.residual)))
        return data

    def _chunk(self, data: _TrainingData, num_features: int) -> int:
        """Centres re-centred per batched step."""
        if self.chunk_size is not None:
            return self.chunk_size
        return max(1, _DEFAULT_CHUNK_ELEMENTS // (data.inputs.size(-2) * num_features))

    def _features(self, data: _TrainingData, offsets: Tensor) -> Tensor:
        """Float64 :math:`a\\,R(u)` at offsets ``u``."""
        return (data.amplitude * self.local_features(offsets)).to(_FACTOR_DTYPE)

    def _recentred(self, data: _TrainingData, centers: Tensor) -> tuple[CapacitanceFactor, Tensor]:
        """Factors and posterior weights of the models re-centred at ``centers`` ``(C, *batch, d)``."""
        phi = self._features(data, data.inputs - centers.unsqueeze(-2))  # (C, *batch, N, F)
        factor = CapacitanceFactor.from_features(phi, data.noise)
        rhs = phi.mT @ (data.residual / data.noise).unsqueeze(-1)
        return factor, factor.solve(rhs).squeeze(-1)

    # ------------------------------------------------------------------ per-test-point centring
    def _predict_recentred(self, data: _TrainingData, test_inputs: Tensor, variances: bool) -> tuple[Tensor, Tensor | None]:
        """Mean and variance ``(*batch, M)`` with every test point as its own centre, in chunks of test points."""
        # At its own centre a test point has offset 0: its features are R(0) (the constant feature).
        phi_star = self._features(data, torch.zeros_like(test_inputs[..., :1, :]))  # (*batch, 1, F)
        means, variances_ = [], []
        step = self._chunk(data, phi_star.size(-1))
        for start in range(0, test_inputs.size(-2), step):
            chunk = test_inputs[..., start : start + step, :].movedim(-2, 0)  # (B, *batch, d)
            factor, weights = self._recentred(data, chunk)
            means.append((weights * phi_star.squeeze(-2)).sum(-1))
            if variances:
                whitened = factor.solve_root(phi_star.mT.expand(*weights.shape, 1))
                variances_.append(whitened.square().sum((-2, -1)))
        mean = torch.cat(means).movedim(0, -1)
        return mean, torch.cat(variances_).movedim(0, -1) if variances else None

    # ------------------------------------------------------------------ clustered centres
    @property
    def local_posteriors(self) -> LocalPosteriors | None:
        """Factors at the cluster (or given) centres, built once per strategy."""
        cached = getattr(self, "_local_posteriors", None)
        if cached is not None:
            return cached
        data = self._training_data()
        if data is None:
            return None
        with torch.no_grad() if settings.detach_test_caches.on() else torch.enable_grad():
            scaled = data.inputs.detach()
            if isinstance(self.centers, str):
                centers = farthest_point_clustering(scaled, self.threshold, self.max_centers).centers
            else:
                centers = self.centers.to(scaled).expand(*scaled.shape[:-2], *self.centers.shape[-2:])
            radius = nearest_center(scaled, centers)[1].max(-1).values
            factors, weights = [], []
            by_center = centers.movedim(-2, 0)  # (K, *batch, d)
            step = self._chunk(data, self.local_features(scaled[..., :1, :]).size(-1))
            for start in range(0, by_center.size(0), step):
                factor, weight = self._recentred(data, by_center[start : start + step])
                factors.append(factor.cholesky)
                weights.append(weight)
        posteriors = LocalPosteriors(
            centers, CapacitanceFactor(torch.cat(factors)), torch.cat(weights), radius, feature_versions(self._kernel)
        )
        self._local_posteriors = posteriors
        return posteriors

    def _predict_clustered(self, data: _TrainingData, test_inputs: Tensor, variances: bool) -> tuple[Tensor, Tensor | None]:
        local = self.local_posteriors
        self._check_features_unchanged(local)
        batch_shape = torch.broadcast_shapes(test_inputs.shape[:-2], local.centers.shape[:-2])
        test_inputs = test_inputs.expand(*batch_shape, *test_inputs.shape[-2:])
        centers = local.centers.expand(*batch_shape, *local.centers.shape[-2:])
        index, distance = nearest_center(test_inputs, centers)  # (*batch, M)
        nearest = centers.gather(-2, index.unsqueeze(-1).expand(*index.shape, centers.size(-1)))
        phi = self._features(data, test_inputs - nearest)  # (*batch, M, F)
        weights = local.weights.movedim(0, -2).expand(*batch_shape, -1, -1)  # (*batch, K, F)
        mean = (phi * weights.gather(-2, index.unsqueeze(-1).expand_as(phi))).sum(-1)
        variance = self._grouped_variance(local.factor.cholesky, phi, index) if variances else None
        if self.recentre_outside:
            mean, variance = self._recentre_outside(data, test_inputs, distance > local.radius.unsqueeze(-1), mean, variance)
        return mean, variance

    @staticmethod
    def _grouped_variance(cholesky: Tensor, phi: Tensor, index: Tensor) -> Tensor:
        """:math:`\\lVert L_{c(i)}^{-1}\\phi_i\\rVert^2`: test points grouped by (batch member, centre), one
        triangular solve with many right-hand sides per group (one host read of the group sizes)."""
        num_centers = cholesky.size(0)
        chol = cholesky.movedim(0, -3)  # (*batch, K, F, F)
        chol = chol.expand(*phi.shape[:-2], *chol.shape[-3:]).reshape(-1, *chol.shape[-2:])
        batch_offset = torch.arange(phi.shape[:-2].numel(), device=phi.device).view(*phi.shape[:-2], 1) * num_centers
        group = (index + batch_offset).reshape(-1)
        rows = phi.reshape(-1, phi.size(-1))
        order = torch.argsort(group)
        sizes = torch.bincount(group, minlength=chol.size(0)).tolist()
        pieces = []
        for g, part in enumerate(torch.split(rows[order], sizes)):
            if part.size(0):
                pieces.append(torch.linalg.solve_triangular(chol[g], part.mT, upper=False).square().sum(-2))
        variance = torch.empty_like(group, dtype=phi.dtype).scatter(0, order, torch.cat(pieces))
        return variance.view(index.shape)

    def _recentre_outside(self, data, test_inputs, outside, mean, variance):
        rows = outside.reshape(-1, outside.size(-1)).any(0).nonzero().squeeze(-1)
        if rows.numel() == 0:
            return mean, variance
        local_mean, local_variance = self._predict_recentred(data, test_inputs[..., rows, :], variance is not None)
        mask = outside[..., rows]
        mean = mean.index_copy(-1, rows, torch.where(mask, local_mean, mean[..., rows]))
        if variance is not None:
            variance = variance.index_copy(-1, rows, torch.where(mask, local_variance, variance[..., rows]))
        return mean, variance

    # ------------------------------------------------------------------ prediction
    def exact_prediction(
        self, test_mean: Tensor, test_test_covar: LinearOperator, test_train_covar: LinearOperator
    ) -> tuple[Tensor, LinearOperator]:
        test_root = _centred_root(test_test_covar)
        data = self._training_data()
        if test_root is None or data is None:
            self._fallback_to_global()
            return super().exact_prediction(test_mean, test_test_covar, test_train_covar)
        variances = not settings.skip_posterior_variances.on()
        if isinstance(self.centers, str) and self.centers == "test":
            mean, variance = self._predict_recentred(data, test_root.inputs, variances)
        else:
            mean, variance = self._predict_clustered(data, test_root.inputs, variances)
        dtype = test_mean.dtype
        mean = mean.to(dtype) + test_mean
        if variance is None:
            return mean, ZeroLinearOperator(*mean.shape, mean.size(-1), dtype=dtype, device=mean.device)
        return mean, DiagLinearOperator(variance.to(dtype))

    def _fallback_to_global(self) -> None:
        warnings.warn(
            "Localized prediction needs the kernel's re-centrable feature roots (a LocalizedMaclaurinKernel alone "
            "or inside ScaleKernel, with a Gaussian likelihood); predicting with the global feature-space "
            "strategy instead.",
            DispatchFallbackWarning,
            stacklevel=3,
        )

    def get_fantasy_strategy(self, inputs, targets, full_inputs, full_targets, full_output, **kwargs):
        raise NotImplementedError(
            "Localized prediction does not support fantasy models (get_fantasy_model, BoTorch fantasize or "
            "condition_on_observations): its factors are tied to centres. Use MaclaurinKernel (global predictor) "
            "for fantasies, or rebuild the model on the extended data."
        )
