r"""SR(3,3) quadrature features for the arc-cosine kernels (Munkhoeva, Kapushev, Burnaev & Oseledets 2018).

Reference: M. Munkhoeva, Y. Kapushev, E. Burnaev, I. Oseledets. *Quadrature-based Features for Kernel
Approximation.* Advances in Neural Information Processing Systems (NeurIPS), 2018.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel

from gprf.features import QuadratureFeatures
from gprf.kernels.arc_cosine import LENGTHSCALE_KWARGS, ArcCosineKernel, scale_free_error
from gprf.kernels.feature_map_owner import resolve_num_dims
from gprf.kernels.random_feature_kernel import RandomFeatureKernel


class ArcCosineQuadratureKernel(RandomFeatureKernel):
    r"""SR(3,3) quadrature-feature approximation of the arc-cosine kernel of order 0 or 1.

    :math:`\hat k(x, y) = \phi(x)^\top\phi(y)` with :math:`\phi` the :class:`~gprf.features.QuadratureFeatures`
    of ``num_rules`` stochastic spherical-radial rules for :class:`~gprf.kernels.ArcCosineKernel` (Cho & Saul
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
        order: 0 (step activation) or 1 (ReLU).
        rotation: ``"haar"`` (exactly unbiased) or ``"butterfly"`` (:math:`O(d\log d)`).
        seed: Seed of the feature draws (``None``: from the global RNG).
        kwargs: GPyTorch :class:`~gpytorch.kernels.Kernel` arguments (``batch_shape``, ``active_dims``).

    Example:
        >>> relu_kernel = ScaleKernel(ArcCosineQuadratureKernel(num_rules=4, num_dims=8, order=1))
    """

    has_lengthscale = False

    def __init__(
        self,
        num_rules: int,
        num_dims: int | None = None,
        order: int = 1,
        rotation: str = "haar",
        seed: int | None = None,
        **kwargs,
    ) -> None:
        if isinstance(order, bool) or order not in (0, 1):
            raise ValueError(f"order must be 0 or 1 for ArcCosineQuadratureKernel, got {order!r}.")
        for name in LENGTHSCALE_KWARGS:
            if kwargs.get(name) is not None:
                raise scale_free_error(order, f"got {name}=")
        num_dims = resolve_num_dims(num_dims, None, kwargs.get("active_dims"), "ArcCosineQuadratureKernel")
        feature_map = QuadratureFeatures(
            num_dims,
            num_rules,
            kernel=f"arccos{order}",
            rotation=rotation,
            batch_shape=kwargs.get("batch_shape", torch.Size()),
            seed=seed,
        )
        super().__init__(feature_map, **kwargs)
        self.order = order

    def _set_lengthscale(self, value) -> None:
        raise scale_free_error(self.order, "cannot set lengthscale")

    def exact(self) -> Kernel:
        """The :class:`~gprf.kernels.ArcCosineKernel` of the same order."""
        exact = ArcCosineKernel(order=self.order, batch_shape=self.batch_shape, active_dims=self.active_dims)
        return exact.to(self.feature_map.radii)
