r"""Localized prediction for shift-invariant feature kernels (Wacker & Filippone 2022, §3.2–3.3, Alg. 1).

A shift-invariant kernel satisfies :math:`k(x - c, y - c) = k(x, y)` for every centre :math:`c`, so the exact GP
predictive at :math:`x_*` is unchanged if every input is shifted by :math:`-c`. Its random-feature approximation
is not: a truncated Maclaurin expansion of the Gaussian kernel is exact only near its centre (it vanishes far
from it; ibid., Thm. 3.1). Predicting at :math:`x_*` with the features re-centred at :math:`c`,

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

Reference: J. Wacker, M. Filippone. *Local Random Feature Approximations of the Gaussian Kernel.* Procedia Computer
Science (KES), 2022 (arXiv:2204.05667).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from gpytorch import settings
from linear_operator.operators import DiagLinearOperator, LinearOperator, ZeroLinearOperator
from torch import Tensor

from gprf.exceptions import DispatchFallbackWarning
from gprf.linalg import CapacitanceFactor, FeatureRoot, factor_capacitance, feature_root
from gprf.ops.clustering import farthest_point_clustering, nearest_center
from gprf.prediction.feature_space import FeatureSpacePredictionStrategy
from gprf.settings import factor_dtype

# Elements of the largest (chunk x N x F) feature tensor formed at once when no chunk size is given (128 MiB float64).
_DEFAULT_CHUNK_ELEMENTS = 2**24


def _recentrable_root(covariance: object) -> FeatureRoot | None:
    """The feature root behind ``covariance`` when it carries the inputs re-centring needs, else ``None``."""
    root = feature_root(covariance)
    return None if root is None or root.inputs is None else root


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
    noise: Tensor  # (*batch, N) or (*batch, 1), factor dtype
    residual: Tensor  # y - m(X), (*batch, N), factor dtype
    num_features: int
    versions: tuple[int, ...]


class LocalizedPredictionStrategy(FeatureSpacePredictionStrategy):
    r"""GPyTorch prediction strategy that re-centres the features near each test point (module docstring).

    Handed out by :class:`~gprf.kernels.LocalizedMaclaurinKernel`; the marginal likelihood is untouched (it
    uses the globally centred kernel). The kernel hands over the map :math:`(Z, c) \mapsto R_c(Z)` with the other
    constants; the scaled inputs :math:`Z` of the training and test points come with the covariances themselves
    (:attr:`FeatureRoot.inputs <gprf.linalg.FeatureRoot.inputs>`), so this module never imports kernels.

    Args:
        recentred_features: :math:`(Z, c) \mapsto R_c(Z)`, the real root of the same features expanded about the
            centre :math:`c` (so that :math:`R = R_{c_0}(Z)` for the map's own centre :math:`c_0`); ``Z`` and
            ``c`` broadcast.
        centers: ``"test"``, ``"cluster"``, or a tensor ``(*batch, K, d)`` of scaled centres.
        threshold: Clustering threshold :math:`\theta` in scaled units (lengthscales), ``"cluster"`` only.
        max_centers: Cap on the number of clusters, ``"cluster"`` only.
        chunk_size: Centres (test points or clusters) re-centred per batched step; ``None`` bounds the
            ``chunk x N x F`` feature tensor by :math:`2^{24}` elements.
        recentre_outside: Re-centre test points outside the region covered by the centres individually.
    """

    adopts_root_posterior = False  # its factors are of re-centred features

    def __init__(
        self,
        train_inputs,
        train_prior_dist,
        train_labels,
        likelihood,
        *,
        recentred_features: Callable[[Tensor, Tensor], Tensor],
        centers: str | Tensor = "test",
        threshold: float = 1.0,
        max_centers: int = 100,
        chunk_size: int | None = None,
        recentre_outside: bool = True,
        root=None,
        inv_root=None,
    ) -> None:
        super().__init__(train_inputs, train_prior_dist, train_labels, likelihood, root=root, inv_root=inv_root)
        self.recentred_features = recentred_features
        self.centers = centers
        self.threshold = threshold
        self.max_centers = max_centers
        self.chunk_size = chunk_size
        self.recentre_outside = recentre_outside

    # ------------------------------------------------------------------ training data
    def _training_data(self) -> _TrainingData | None:
        train = _recentrable_root(self.lik_train_train_covar)
        if train is None or train.noise is None:
            return None
        dtype = factor_dtype.value()
        amplitude = train.amplitude()
        amplitude = amplitude if amplitude is not None else train.inputs.new_ones(())
        tensors = (
            train.inputs,
            amplitude,
            train.noise.to(dtype),
            (self.train_labels - self.train_prior_dist.mean).to(dtype),
        )
        if settings.detach_test_caches.on():
            tensors = tuple(t.detach() for t in tensors)
        return _TrainingData(*tensors, train.num_columns, train.versions)

    def _chunk(self, data: _TrainingData) -> int:
        """Centres re-centred per batched step."""
        if self.chunk_size is not None:
            return self.chunk_size
        return max(1, _DEFAULT_CHUNK_ELEMENTS // (data.inputs.size(-2) * data.num_features))

    def _features(self, data: _TrainingData, points: Tensor, centers: Tensor) -> Tensor:
        """:math:`a\\,R_c(z)` of scaled ``points`` about ``centers`` (broadcasting), in the factor dtype."""
        return (data.amplitude * self.recentred_features(points, centers)).to(factor_dtype.value())

    def _recentred(self, data: _TrainingData, centers: Tensor) -> tuple[CapacitanceFactor, Tensor]:
        """Factors and posterior weights of the models re-centred at ``centers`` ``(C, *batch, d)``."""
        phi = self._features(data, data.inputs, centers.unsqueeze(-2))  # (C, *batch, N, F)
        factor, rhs = factor_capacitance(phi, data.noise, data.residual.unsqueeze(-1))
        return factor, factor.solve(rhs).squeeze(-1)

    # ------------------------------------------------------------------ per-test-point centring
    def _predict_recentred(
        self, data: _TrainingData, test_inputs: Tensor, variances: bool
    ) -> tuple[Tensor, Tensor | None]:
        """Mean and variance ``(*batch, M)`` with every test point as its own centre, in chunks of test points."""
        # About its own centre a test point has offset 0: its features are R_c(c) = R_0(0) (the constant feature).
        origin = torch.zeros_like(test_inputs[..., :1, :])
        phi_star = self._features(data, origin, origin)  # (*batch, 1, F)
        means, variances_ = [], []
        step = self._chunk(data)
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
            step = self._chunk(data)
            for start in range(0, by_center.size(0), step):
                factor, weight = self._recentred(data, by_center[start : start + step])
                factors.append(factor.cholesky)
                weights.append(weight)
        posteriors = LocalPosteriors(
            centers, CapacitanceFactor(torch.cat(factors)), torch.cat(weights), radius, data.versions
        )
        self._local_posteriors = posteriors
        return posteriors

    def _predict_clustered(
        self, data: _TrainingData, test: FeatureRoot, variances: bool
    ) -> tuple[Tensor, Tensor | None]:
        local = self.local_posteriors
        self._check_features_unchanged(test, local)
        test_inputs = test.inputs
        batch_shape = torch.broadcast_shapes(test_inputs.shape[:-2], local.centers.shape[:-2])
        test_inputs = test_inputs.expand(*batch_shape, *test_inputs.shape[-2:])
        centers = local.centers.expand(*batch_shape, *local.centers.shape[-2:])
        index, distance = nearest_center(test_inputs, centers)  # (*batch, M)
        nearest = centers.gather(-2, index.unsqueeze(-1).expand(*index.shape, centers.size(-1)))
        phi = self._features(data, test_inputs, nearest)  # (*batch, M, F)
        weights = local.weights.movedim(0, -2).expand(*batch_shape, -1, -1)  # (*batch, K, F)
        mean = (phi * weights.gather(-2, index.unsqueeze(-1).expand_as(phi))).sum(-1)
        variance = self._grouped_variance(local.factor.cholesky, phi, index) if variances else None
        if self.recentre_outside:
            mean, variance = self._recentre_outside(
                data, test_inputs, distance > local.radius.unsqueeze(-1), mean, variance
            )
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
        self.refresh_if_stale()
        test = _recentrable_root(test_test_covar)
        data = self._training_data()
        if test is None or data is None:
            self._fallback_to_global()
            return super().exact_prediction(test_mean, test_test_covar, test_train_covar)
        variances = not settings.skip_posterior_variances.on()
        if isinstance(self.centers, str) and self.centers == "test":
            mean, variance = self._predict_recentred(data, test.inputs, variances)
        else:
            mean, variance = self._predict_clustered(data, test, variances)
        dtype = test_mean.dtype
        mean = mean.to(dtype) + test_mean
        if variance is None:
            return mean, ZeroLinearOperator(*mean.shape, mean.size(-1), dtype=dtype, device=mean.device)
        return mean, DiagLinearOperator(variance.to(dtype))

    def _forget_caches(self) -> None:
        super()._forget_caches()
        self._local_posteriors = None

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
