r"""Additive (first- and second-order ANOVA) stationary kernels: random Fourier features per input dimension and per
pair, and the exact kernel they approximate.

.. math::
    k(x, y) = \sum_{j=1}^d k_0\Big(\frac{x_j - y_j}{\ell_j}\Big)
      + \tau \sum_{i<j} k_0\Big(\frac{x_i - y_i}{\ell_i}\Big)\,k_0\Big(\frac{x_j - y_j}{\ell_j}\Big),

with :math:`k_0` the unit-lengthscale RBF or Matérn profile, :math:`\ell` an (ARD) lengthscale and :math:`\tau \ge 0`
the interaction variance (second order only). The first term is GPyTorch's
``AdditiveStructureKernel(RBFKernel(...), num_dims=d)``; with both terms it is the additive kernel of Duvenaud,
Nickisch & Rasmussen (2011) truncated at order two, the overall amplitude coming from a ``ScaleKernel``.

References:
    * D. Duvenaud, H. Nickisch, C. E. Rasmussen. *Additive Gaussian Processes.* Advances in Neural Information
      Processing Systems (NeurIPS), 2011.
    * A. Rahimi, B. Recht. *Random Features for Large-Scale Kernel Machines.* Advances in Neural Information
      Processing Systems (NeurIPS), 2007.
"""

from __future__ import annotations

import torch
from gpytorch.constraints import Interval, Positive
from gpytorch.kernels import Kernel
from gpytorch.priors import Prior
from torch import Tensor

from gprf.features.additive import ADDITIVE_ORDERS, AdditiveFourierFeatures
from gprf.features.spectral import SPECTRA
from gprf.kernels.feature_map_owner import resolve_num_dims
from gprf.kernels.random_feature_kernel import RandomFeatureKernel


class _InteractionVariance:
    """The positive interaction variance :math:`\\tau` of second-order additive kernels (a mixin of both kernels)."""

    def _register_interaction_variance(self, prior: Prior | None, constraint: Interval | None) -> None:
        self.register_parameter("raw_interaction_variance", torch.nn.Parameter(torch.zeros(*self.batch_shape, 1)))
        self.register_constraint("raw_interaction_variance", Positive() if constraint is None else constraint)
        if prior is not None:
            self.register_prior(
                "interaction_variance_prior",
                prior,
                lambda m: m.interaction_variance,
                lambda m, v: m._set_interaction_variance(v),
            )

    @property
    def interaction_variance(self) -> Tensor:
        """:math:`\\tau`, shape ``(*batch_shape, 1)``."""
        return self.raw_interaction_variance_constraint.transform(self.raw_interaction_variance)

    @interaction_variance.setter
    def interaction_variance(self, value: float | Tensor) -> None:
        self._set_interaction_variance(value)

    def _set_interaction_variance(self, value: float | Tensor) -> None:
        value = torch.as_tensor(value).to(self.raw_interaction_variance)
        self.initialize(raw_interaction_variance=self.raw_interaction_variance_constraint.inverse_transform(value))


class AdditiveFeatureKernel(_InteractionVariance, RandomFeatureKernel):
    r"""Random Fourier features of a first- or second-order additive RBF/Matérn kernel (see the module docstring).

    The root concatenates independent random Fourier features of every one-dimensional component
    (``features_per_dim`` columns each) and, for ``order=2``, of every pairwise interaction
    :math:`k_0(\Delta_i)k_0(\Delta_j)` (``features_per_pair`` columns each, scaled by :math:`\sqrt\tau`); see
    :class:`~gprf.features.AdditiveFourierFeatures`. The root has :math:`d F_1 + \binom d2 F_2` columns: with
    :math:`d = 20`, second order and :math:`F_1 = F_2 = 64` that is 13,440 columns, so keep :math:`F_2` small or
    use first order in high dimensions. The estimate's variance is the sum of the components' (independent
    draws): :meth:`variance`.

    Training and prediction cost :math:`O(NF^2)` and :math:`O(MF^2)` with :math:`F` the root's columns, where the
    exact additive kernel costs :math:`O(N^3)` (GPyTorch issue #748: out of memory at :math:`N = 13.5\text{k}`,
    :math:`d = 26`).

    Args:
        features_per_dim: Features of each one-dimensional component (even).
        num_dims: Input dimension :math:`d` (defaults to ``ard_num_dims`` or ``len(active_dims)``).
        kernel: ``"rbf"``, ``"matern12"``, ``"matern32"`` or ``"matern52"``.
        order: 1 or 2.
        features_per_pair: Features of each pairwise component (even; default ``features_per_dim``); ``order=2``
            only: with ``order=1`` it raises ``ValueError`` (there are no pairwise components).
        seed: Seed of the draws.
        interaction_variance_prior, interaction_variance_constraint: For :math:`\tau` (order 2; default
            ``Positive()``).
        kwargs: GPyTorch ``Kernel`` arguments (``ard_num_dims``, ``batch_shape``, ``active_dims``,
            ``lengthscale_prior``, ...).

    Example:
        >>> covar_module = ScaleKernel(AdditiveFeatureKernel(64, num_dims=20, ard_num_dims=20, order=2,
        ...                                                  features_per_pair=8))
    """

    def __init__(
        self,
        features_per_dim: int,
        num_dims: int | None = None,
        kernel: str = "rbf",
        order: int = 1,
        features_per_pair: int | None = None,
        seed: int | None = None,
        interaction_variance_prior: Prior | None = None,
        interaction_variance_constraint: Interval | None = None,
        **kwargs,
    ) -> None:
        num_dims = resolve_num_dims(
            num_dims, kwargs.get("ard_num_dims"), kwargs.get("active_dims"), "AdditiveFeatureKernel"
        )
        feature_map = AdditiveFourierFeatures(
            num_dims,
            features_per_dim,
            kernel=kernel,
            order=order,
            features_per_pair=features_per_pair,
            batch_shape=kwargs.get("batch_shape", torch.Size()),
            seed=seed,
        )
        super().__init__(feature_map, **kwargs)
        if order == 2:
            self._register_interaction_variance(interaction_variance_prior, interaction_variance_constraint)

    @property
    def order(self) -> int:
        return self.feature_map.order

    def features(self, x: Tensor) -> Tensor:
        """Real root of raw inputs: the components' features, the interactions' scaled by :math:`\\sqrt\\tau`."""
        root = super().features(x)
        if self.order == 1:
            return root
        first, second = self.feature_map.component_slices()
        scale = self.interaction_variance.sqrt().unsqueeze(-1)  # (*batch, 1, 1)
        interactions = root[..., second] * scale
        return torch.cat([root[..., first].expand(*interactions.shape[:-1], -1), interactions], dim=-1)

    def expected_kernel(self, x1: Tensor, x2: Tensor) -> Tensor:
        r""":math:`E[\hat k(x1_i, x2_i)]` row by row: the exact kernel (raw inputs)."""
        first, second = self.feature_map.component_kernels(self.scale_inputs(x1), self.scale_inputs(x2))
        return first + self._tau() * second

    def variance(self, x1: Tensor, x2: Tensor) -> Tensor:
        r"""Closed-form variance of :math:`\hat k(x1_i, x2_i)` row by row (raw inputs): the first-order variance plus
        :math:`\tau^2` times the interactions' (independent components add)."""
        first, second = self.feature_map.component_variances(self.scale_inputs(x1), self.scale_inputs(x2))
        return first + self._tau() ** 2 * second

    def _tau(self) -> Tensor | float:
        return self.interaction_variance if self.order == 2 else 0.0

    def exact(self) -> Kernel:
        """:class:`ExactAdditiveKernel` sharing this kernel's lengthscale and interaction variance."""
        exact = ExactAdditiveKernel(
            kernel=self.feature_map.kernel,
            order=self.order,
            ard_num_dims=self.ard_num_dims,
            batch_shape=self.batch_shape,
            active_dims=self.active_dims,
        )
        if self.order == 2:
            exact.raw_interaction_variance = self.raw_interaction_variance
            exact.register_constraint("raw_interaction_variance", self.raw_interaction_variance_constraint)
        return self._tie_lengthscale(exact)


class ExactAdditiveKernel(_InteractionVariance, Kernel):
    r"""The exact first- or second-order additive RBF/Matérn kernel of the module docstring.

    Order one equals GPyTorch's ``AdditiveStructureKernel(RBFKernel(ard_num_dims=d), num_dims=d)`` (deprecated
    there); the second-order term is the second elementary symmetric polynomial of the one-dimensional kernels,
    :math:`e_2 = (e_1^2 - \sum_j k_j^2)/2` (Newton's identity, as Duvenaud, Nickisch & Rasmussen 2011 compute it).
    Costs :math:`O(NMd)` memory for an :math:`N\times M` block.

    Args:
        kernel: ``"rbf"``, ``"matern12"``, ``"matern32"`` or ``"matern52"``.
        order: 1 or 2.
        kwargs: GPyTorch ``Kernel`` arguments.
    """

    has_lengthscale = True

    def __init__(
        self,
        kernel: str = "rbf",
        order: int = 1,
        interaction_variance_prior: Prior | None = None,
        interaction_variance_constraint: Interval | None = None,
        **kwargs,
    ) -> None:
        if kernel not in SPECTRA:
            raise ValueError(f"Unknown kernel {kernel!r}; valid choices are: {', '.join(map(repr, SPECTRA))}.")
        if order not in ADDITIVE_ORDERS:
            raise ValueError(f"order must be 1 or 2 (first- or second-order additive kernel), got {order!r}.")
        super().__init__(**kwargs)
        self.kernel, self.order = kernel, order
        if order == 2:
            self._register_interaction_variance(interaction_variance_prior, interaction_variance_constraint)

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params) -> Tensor:
        if last_dim_is_batch:
            raise NotImplementedError(f"{type(self).__name__} does not support last_dim_is_batch.")
        x1_, x2_ = x1 / self.lengthscale, x2 / self.lengthscale
        delta = (x1_ - x2_) if diag else (x1_.unsqueeze(-2) - x2_.unsqueeze(-3))
        per_dim = SPECTRA[self.kernel].profile(delta.abs())
        first = per_dim.sum(-1)
        if self.order == 1:
            return first
        second = (first.square() - per_dim.square().sum(-1)) / 2
        tau = self.interaction_variance if diag else self.interaction_variance.unsqueeze(-1)
        return first + tau * second
