r"""Random Fourier features of first- and second-order additive (ANOVA) stationary kernels, per input dimension and
per pair; the exact kernel is :class:`~gprf.kernels.exact.ExactAdditiveKernel` (its module states the kernel).

References:
    * D. Duvenaud, H. Nickisch, C. E. Rasmussen. *Additive Gaussian Processes.* Advances in Neural Information
      Processing Systems (NeurIPS), 2011.
    * A. Rahimi, B. Recht. *Random Features for Large-Scale Kernel Machines.* Advances in Neural Information
      Processing Systems (NeurIPS), 2007.
"""

from __future__ import annotations

import torch
from gpytorch.constraints import Interval
from gpytorch.kernels import Kernel
from gpytorch.priors import Prior
from torch import Tensor

from gprf.features import AdditiveFourierFeatures, FeatureMapBase
from gprf.kernels.exact.additive import InteractionVariance
from gprf.kernels.exact.targets import exact_target
from gprf.kernels.random_feature_kernel import RandomFeatureKernel


class AdditiveFeatureKernel(InteractionVariance, RandomFeatureKernel):
    r"""Random Fourier features of a first- or second-order additive RBF/Matérn kernel
    (:class:`~gprf.kernels.exact.ExactAdditiveKernel`).

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
        feature_map: A built :class:`~gprf.features.AdditiveFourierFeatures` instead of its arguments.
        interaction_variance_prior, interaction_variance_constraint: For :math:`\tau` (order 2; default
            ``Positive()``).
        kwargs: The arguments of :class:`~gprf.features.AdditiveFourierFeatures` — ``kernel`` (``"rbf"``,
            ``"matern12"``, ``"matern32"``, ``"matern52"`` or a :class:`~gprf.features.StationarySpectrum`), ``order``
            (1 or 2), ``features_per_pair`` (features of each pairwise component, even; default ``features_per_dim``;
            ``order=2`` only: with ``order=1`` it raises ``ValueError``), ``seed`` — then GPyTorch ``Kernel``
            arguments (``ard_num_dims``, ``batch_shape``, ``active_dims``, ``lengthscale_prior``, ...).

    Example:
        >>> covar_module = ScaleKernel(AdditiveFeatureKernel(64, num_dims=20, ard_num_dims=20, order=2,
        ...                                                  features_per_pair=8))
    """

    feature_map_class = AdditiveFourierFeatures

    def __init__(
        self,
        features_per_dim: int | FeatureMapBase | None = None,
        num_dims: int | None = None,
        *,
        interaction_variance_prior: Prior | None = None,
        interaction_variance_constraint: Interval | None = None,
        **kwargs,
    ) -> None:
        super().__init__(features_per_dim, num_dims, **kwargs)
        if self.order == 2:
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
        """:class:`~gprf.kernels.exact.ExactAdditiveKernel` sharing this kernel's lengthscale and interaction
        variance."""
        exact = exact_target("additive").build(
            kernel=self.feature_map.spectrum,
            order=self.order,
            ard_num_dims=self.ard_num_dims,
            batch_shape=self.batch_shape,
            active_dims=self.active_dims,
        )
        if self.order == 2:
            exact.raw_interaction_variance = self.raw_interaction_variance
            exact.register_constraint("raw_interaction_variance", self.raw_interaction_variance_constraint)
        return self._tie_lengthscale(exact)
