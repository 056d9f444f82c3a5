r"""SR(3,3) quadrature features for the RBF kernel (Munkhoeva, Kapushev, Burnaev & Oseledets 2018).

Reference: M. Munkhoeva, Y. Kapushev, E. Burnaev, I. Oseledets. *Quadrature-based Features for Kernel
Approximation.* Advances in Neural Information Processing Systems (NeurIPS), 2018.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel

from gprf.features import FeatureMapBase, QuadratureFeatures
from gprf.kernels.exact.targets import exact_target
from gprf.kernels.random_feature_kernel import RandomFeatureKernel


class QuadratureKernel(RandomFeatureKernel):
    r"""SR(3,3) quadrature-feature approximation of GPyTorch's RBF kernel :math:`e^{-\lVert x - y\rVert^2/2\ell^2}`.

    :math:`\hat k(x, y) = \phi(x/\ell)^\top\phi(y/\ell)` with :math:`\phi` the
    :class:`~gprf.features.QuadratureFeatures` of ``num_rules`` stochastic spherical-radial rules
    (``2 * num_rules * (p + 1)`` features, ``p`` the input dimension, padded to a power of two for
    ``rotation="butterfly"``; see :attr:`~gprf.kernels.FeatureMapOwner.num_features`). Inputs are divided by the (ARD)
    lengthscale before featurization, and :meth:`exact` is a tied ``RBFKernel``. For the scale-free arc-cosine kernels
    use :class:`~gprf.kernels.ArcCosineQuadratureKernel`.

    Reference: M. Munkhoeva, Y. Kapushev, E. Burnaev, I. Oseledets. *Quadrature-based Features for Kernel
    Approximation.* Advances in Neural Information Processing Systems (NeurIPS), 2018.

    Args:
        num_rules: Number of SR(3,3) rules ``n >= 1``.
        num_dims: Input dimension (defaults to ``ard_num_dims`` or ``len(active_dims)``).
        feature_map: A built :class:`~gprf.features.QuadratureFeatures` of the ``"rbf"`` kernel instead of its
            arguments.
        kwargs: The arguments of :class:`~gprf.features.QuadratureFeatures` — ``rotation`` (``"haar"``, exactly
            unbiased, or ``"butterfly"``, :math:`O(d\log d)`), ``seed`` (``None``: from torch's global generator
            state, not advanced) — then
            GPyTorch :class:`~gpytorch.kernels.Kernel` arguments.

    Example:
        >>> covar_module = ScaleKernel(QuadratureKernel(num_rules=4, num_dims=8, ard_num_dims=8))
    """

    feature_map_class = QuadratureFeatures

    def __init__(self, num_rules: int | FeatureMapBase | None = None, num_dims: int | None = None, **kwargs) -> None:
        super().__init__(num_rules, num_dims, **kwargs)
        if self.feature_map.kernel != "rbf":
            raise ValueError(
                f"QuadratureKernel approximates the RBF kernel, got a feature map of {self.feature_map.kernel!r}; for "
                "the arc-cosine kernels use ArcCosineQuadratureKernel."
            )

    @classmethod
    def build_feature_map(cls, num_dims: int, batch_shape: torch.Size, **map_arguments) -> FeatureMapBase:
        """The quadrature features of the RBF kernel."""
        if "kernel" in map_arguments:
            raise TypeError(
                "QuadratureKernel approximates the RBF kernel; for the arc-cosine kernels use "
                "ArcCosineQuadratureKernel(num_rules, num_dims, order=0 or 1)."
            )
        return super().build_feature_map(num_dims, batch_shape, kernel="rbf", **map_arguments)

    def exact(self) -> Kernel:
        """A tied ``RBFKernel`` (same lengthscale parameter and constraint)."""
        exact = exact_target(self.feature_map.kernel).build(
            ard_num_dims=self.ard_num_dims, batch_shape=self.batch_shape, active_dims=self.active_dims
        )
        return self._tie_lengthscale(exact)
