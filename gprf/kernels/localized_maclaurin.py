r"""The Gaussian-kernel Maclaurin approximation with localized prediction (Wacker & Filippone 2022, Alg. 1).

Reference: J. Wacker, M. Filippone. *Local Random Feature Approximations of the Gaussian Kernel.* Procedia
Computer Science (KES), 2022 (arXiv:2204.05667).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from gprf._checks import check_positive_int
from gprf.features import FeatureMapBase
from gprf.features.versions import feature_versions
from gprf.kernels.kernel_origin import KernelOrigin
from gprf.kernels.maclaurin import MaclaurinKernel
from gprf.linalg import FeatureRootLinearOperator
from gprf.prediction import LocalizedPredictionStrategy

CENTER_MODES = ("test", "cluster")


def _check_shift_invariant(kernel: str) -> None:
    if kernel != "gaussian":
        raise ValueError(
            f"LocalizedMaclaurinKernel re-centres the expansion, which relies on the shift invariance "
            f"k(x - c, y - c) = k(x, y) of the Gaussian kernel; the {kernel!r} kernel is not shift invariant. "
            "Use MaclaurinKernel(kernel=...) for its global predictor."
        )


def _check_threshold(threshold: float) -> float:
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float))
        or not math.isfinite(threshold)
        or threshold <= 0
    ):
        raise ValueError(
            f"threshold must be a positive number of lengthscales (the clustering radius theta = threshold * "
            f"lengthscale), got {threshold!r}."
        )
    return float(threshold)


class LocalizedMaclaurinKernel(MaclaurinKernel):
    r"""Maclaurin approximation of the Gaussian kernel whose predictions re-centre the expansion near each test point.

    The truncated Maclaurin expansion of :math:`k(x, y) = e^{-\lVert x - y\rVert^2/2\ell^2}` is exact only near
    its centre; with a short lengthscale the global predictor's mean and variance collapse to zero away from
    the training mean (Wacker & Filippone 2022, Thm. 3.1). The Gaussian kernel is shift invariant, so the
    predictive at :math:`x_*` may use the features of :math:`(x - c)/\ell` for any centre :math:`c`; with
    :math:`c = x_*`,

    .. math::
        \hat k_*(x, y) = \sigma^2\,\hat k\big((x - x_*)/\ell, (y - x_*)/\ell\big)

    makes :math:`k(x_*, X)` and :math:`k(x_*, x_*)` exact (Wacker & Filippone 2022, eq. 6 and §3.2), and far from
    the data the predictive returns to the prior.

    * Training (the marginal likelihood) uses the ordinary Maclaurin Gaussian kernel centred at the training
      mean, exactly as :class:`~gprf.kernels.MaclaurinKernel` (same allocation, ``refit_allocation``, training
      recipe).
    * Prediction uses :class:`~gprf.prediction.LocalizedPredictionStrategy`, selected automatically when the
      kernel (alone or inside ``ScaleKernel``) is the covariance module of an ``ExactGP`` or BoTorch
      ``SingleTaskGP``. Nothing else in the model changes.

    Centres (``centers``):

    * ``"test"``: every test point is its own centre, :math:`O(MNF^2)` (Wacker & Filippone 2022, §3.2), batched
      over ``chunk_size`` test points at a time;
    * ``"cluster"``: farthest-point clustering of the scaled training inputs, started at their mean, adding
      the farthest point until every training point is within :math:`\theta = \text{threshold}\cdot\ell` of a
      centre or ``max_centers`` is reached; one :math:`F\times F` factor per centre (:math:`O(N_CNF^2)`, once),
      nearest-centre assignment at prediction (:math:`O(MF^2)`) (Wacker & Filippone 2022, §3.3, Alg. 1);
    * a tensor ``(K, num_dims)`` of centres in the kernel's input space (after ``active_dims``).

    Predictions are per-point marginals: the predictive covariance is diagonal (each test point has its own
    approximate model). Fantasy models are not supported (use :class:`~gprf.kernels.MaclaurinKernel`).

    Args:
        num_features: Total number ``F`` of features (constant included).
        num_dims: Input dimension (defaults to ``ard_num_dims`` or ``len(active_dims)``).
        centers: ``"test"``, ``"cluster"`` or a tensor of centres.
        threshold: :math:`\theta/\ell` for ``"cluster"`` (default 1.0); must be positive.
        max_centers: Cap on the number of clusters (mean included) for ``"cluster"``.
        chunk_size: Centres re-centred per batched step (memory ``chunk_size x N x F``); ``None``: chosen to
            keep that tensor below :math:`2^{24}` elements.
        recentre_outside: In cluster/centre modes, re-centre test points outside the region the centres cover
            (farther from their nearest centre than every training point is from its own) individually.
        kwargs: As for :class:`~gprf.kernels.MaclaurinKernel` (``feature_map=``, ``train_inputs=``, the arguments of
            :class:`~gprf.features.MaclaurinFeatures` — ``sketch``, ``complex``, ``allocation``, ``min_degree``,
            ``max_degree``, ``seed``; ``kernel`` only ``"gaussian"``, the default here, as localization relies on
            shift invariance — and GPyTorch ``Kernel`` arguments).

    Reference: J. Wacker, M. Filippone. *Local Random Feature Approximations of the Gaussian Kernel.* Procedia
    Computer Science (KES), 2022 (arXiv:2204.05667).

    Example:
        >>> covar_module = ScaleKernel(LocalizedMaclaurinKernel(256, num_dims=d, centers="cluster", threshold=2.0))
    """

    def __init__(
        self,
        num_features: int | FeatureMapBase | None = None,
        num_dims: int | None = None,
        *,
        centers: str | Tensor = "test",
        threshold: float | None = None,
        max_centers: int = 100,
        chunk_size: int | None = None,
        recentre_outside: bool = True,
        **kwargs,
    ) -> None:
        if kwargs.get("posterior", "real_kernel") != "real_kernel":
            raise ValueError("LocalizedMaclaurinKernel predicts with the real-part kernel only: drop posterior=.")
        super().__init__(num_features, num_dims, **kwargs)
        _check_shift_invariant(self.feature_map.kernel)
        self._init_centers(centers, threshold, max_centers)
        self.chunk_size = None if chunk_size is None else check_positive_int(chunk_size, "chunk_size")
        self.recentre_outside = bool(recentre_outside)

    @classmethod
    def build_feature_map(cls, num_dims: int | None, kernel_kwargs: dict, **map_arguments) -> FeatureMapBase:
        """The Maclaurin map of the Gaussian kernel (the default here; another kernel is refused)."""
        _check_shift_invariant(map_arguments.setdefault("kernel", "gaussian"))
        return super().build_feature_map(num_dims, kernel_kwargs, **map_arguments)

    def _init_centers(self, centers: str | Tensor, threshold: float | None, max_centers: int) -> None:
        self.max_centers = check_positive_int(max_centers, "max_centers")
        if torch.is_tensor(centers):
            if threshold is not None:
                raise ValueError("threshold only applies to centers='cluster'; given centres are used as they are.")
            dim = self.feature_map.input_dim
            if centers.dim() != 2 or centers.size(0) == 0 or centers.size(-1) != dim:
                raise ValueError(
                    f"centers must be a tensor of shape (K, {dim}) with K >= 1, got {tuple(centers.shape)}."
                )
            if not centers.is_floating_point() or centers.is_complex() or not bool(torch.isfinite(centers).all()):
                raise ValueError("centers must hold finite real floating-point values.")
            self.center_mode = "given"
            self.threshold = None
            # Kept in the given dtype (not cast to a float32 default): a later .to(float64) cannot restore digits.
            self.register_buffer("centers", centers.detach().clone())
            return
        if centers not in CENTER_MODES:
            raise ValueError(f"centers must be 'test', 'cluster' or a tensor of shape (K, d), got {centers!r}.")
        if centers == "test" and threshold is not None:
            raise ValueError("threshold only applies to centers='cluster'.")
        self.center_mode = centers
        self.threshold = _check_threshold(1.0 if threshold is None else threshold) if centers == "cluster" else None

    def root_operator(self, x: Tensor, features: Tensor) -> FeatureRootLinearOperator:
        """The covariance with the scaled inputs attached (:attr:`FeatureRoot.inputs <gprf.linalg.FeatureRoot.inputs>`),
        the rows the localized strategy re-centres."""
        return FeatureRootLinearOperator(
            features, origin=KernelOrigin(self, x), inputs=self.scale_inputs(x), versions=feature_versions(self)
        )

    def prediction_strategy(self, train_inputs, train_prior_dist, train_labels, likelihood):
        if self.center_mode == "given":
            centers = self.scale_inputs(self.centers.to(self.lengthscale)).detach()
        else:
            centers = self.center_mode
        return LocalizedPredictionStrategy(
            train_inputs,
            train_prior_dist,
            train_labels,
            likelihood,
            recentred_features=self.feature_map.real_features_about,
            centers=centers,
            threshold=self.threshold,
            max_centers=self.max_centers,
            chunk_size=self.chunk_size,
            recentre_outside=self.recentre_outside,
        )

    def extra_repr(self) -> str:
        return f"centers={self.center_mode!r}, threshold={self.threshold}, max_centers={self.max_centers}"
