r"""SR(3,3) quadrature features for the arc-cosine kernels (Munkhoeva, Kapushev, Burnaev & Oseledets 2018).

Reference: M. Munkhoeva, Y. Kapushev, E. Burnaev, I. Oseledets. *Quadrature-based Features for Kernel
Approximation.* Advances in Neural Information Processing Systems (NeurIPS), 2018.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel

from gprf.features import FeatureMapBase, QuadratureFeatures
from gprf.kernels.exact.arc_cosine import LENGTHSCALE_KWARGS, check_order, scale_free_error
from gprf.kernels.exact.targets import exact_target
from gprf.kernels.random_feature_kernel import RandomFeatureKernel

# The map's names of the arc-cosine kernels and their orders.
_ORDERS = {"arccos0": 0, "arccos1": 1}


class ArcCosineQuadratureKernel(RandomFeatureKernel):
    r"""SR(3,3) quadrature-feature approximation of the arc-cosine kernel of order 0 or 1.

    :math:`\hat k(x, y) = \phi(x)^\top\phi(y)` with :math:`\phi` the :class:`~gprf.features.QuadratureFeatures`
    of ``num_rules`` stochastic spherical-radial rules for :class:`~gprf.kernels.exact.ArcCosineKernel` (Cho & Saul
    2009). The arc-cosine kernels are scale-free (:math:`k_0` is invariant to rescaling, :math:`k_1` homogeneous
    of degree one in each argument), so this kernel has **no lengthscale** (``has_lengthscale = False``, as
    GPyTorch's kernels without one): passing ``ard_num_dims``, ``lengthscale_prior`` or
    ``lengthscale_constraint`` raises a ``ValueError``. Wrap it in ``ScaleKernel`` for an amplitude.

    Reference: M. Munkhoeva, Y. Kapushev, E. Burnaev, I. Oseledets. *Quadrature-based Features for Kernel
    Approximation.* Advances in Neural Information Processing Systems (NeurIPS), 2018.

    Reference: Y. Cho, L. K. Saul. *Kernel Methods for Deep Learning.* Advances in Neural Information Processing
    Systems (NeurIPS), 2009.

    Args:
        num_rules: Number of SR(3,3) rules ``n >= 1``.
        num_dims: Input dimension (defaults to ``len(active_dims)``).
        order: 0 (step activation) or 1 (ReLU); by default 1, or a built map's.
        feature_map: A built :class:`~gprf.features.QuadratureFeatures` of ``"arccos0"`` or ``"arccos1"`` instead of
            its arguments.
        kwargs: The arguments of :class:`~gprf.features.QuadratureFeatures` — ``rotation`` (``"haar"``, exactly
            unbiased, or ``"butterfly"``, :math:`O(d\log d)`), ``seed`` (``None``: from torch's global generator
            state, not advanced) — then
            GPyTorch :class:`~gpytorch.kernels.Kernel` arguments (``batch_shape``, ``active_dims``).

    Example:
        >>> relu_kernel = ScaleKernel(ArcCosineQuadratureKernel(num_rules=4, num_dims=8, order=1))
    """

    has_lengthscale = False
    feature_map_class = QuadratureFeatures

    def __init__(
        self,
        num_rules: int | FeatureMapBase | None = None,
        num_dims: int | None = None,
        order: int | None = None,
        **kwargs,
    ) -> None:
        if order is not None:
            kwargs["kernel"] = f"arccos{check_order(order, type(self).__name__)}"
        for name in LENGTHSCALE_KWARGS:
            if kwargs.get(name) is not None:
                raise scale_free_error(1 if order is None else order, f"got {name}=")
        super().__init__(num_rules, num_dims, **kwargs)
        if self.feature_map.kernel not in _ORDERS:
            raise ValueError(
                f"ArcCosineQuadratureKernel approximates the arc-cosine kernels, got a feature map of "
                f"{self.feature_map.kernel!r}; for the RBF kernel use QuadratureKernel."
            )

    @classmethod
    def build_feature_map(cls, num_dims: int, batch_shape: torch.Size, **map_arguments) -> FeatureMapBase:
        """The quadrature features of the arc-cosine kernel of the given order (1 by default)."""
        map_arguments.setdefault("kernel", "arccos1")
        return super().build_feature_map(num_dims, batch_shape, **map_arguments)

    @property
    def order(self) -> int:
        """The order of the map's arc-cosine kernel, 0 or 1."""
        return _ORDERS[self.feature_map.kernel]

    def _set_lengthscale(self, value) -> None:
        raise scale_free_error(self.order, "cannot set lengthscale")

    def exact(self) -> Kernel:
        """The :class:`~gprf.kernels.exact.ArcCosineKernel` of the same order."""
        exact = exact_target(self.feature_map.kernel).build(batch_shape=self.batch_shape, active_dims=self.active_dims)
        return exact.to(self.feature_map.radii)
