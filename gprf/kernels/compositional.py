r"""Compositional random features of computation skeletons as a GPyTorch kernel (the exact kernel is
:class:`~gprf.kernels.exact.CompositionalKernel`).

Reference: A. Daniely, R. Frostig, V. Gupta, Y. Singer. *Random Features for Compositional Kernels.*
arXiv:1703.07872, 2017.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel

from gprf.features import CompositionalFeatures, FeatureMapBase, Skeleton
from gprf.kernels.exact.compositional import check_skeleton_dims
from gprf.kernels.exact.targets import exact_target
from gprf.kernels.random_feature_kernel import RandomFeatureKernel


class CompositionalRandomFeatureKernel(RandomFeatureKernel):
    r"""Compositional random features (Daniely et al. 2017, Alg. 1) of a skeleton kernel, as a GPyTorch kernel.

    :math:`\hat k(x, y) = \phi(x/\ell)^\top\phi(y/\ell)` with :math:`\phi` the
    :class:`~gprf.features.CompositionalFeatures` of ``skeleton``: every feature is a product of a few base
    random features along randomly sampled paths of the skeleton (one on average for ReLU and exponential
    skeletons, whatever the input dimension), repeated monomials merged with ``deduplicate=True``.

    Both base kernels are functions of :math:`x/\ell` (the Gaussian one is stationary, the linear one normalises
    :math:`[x_S/\ell, 1]`), so this kernel has a lengthscale (ARD with ``ard_num_dims``) and :meth:`exact` is a
    :class:`~gprf.kernels.exact.CompositionalKernel` tied to it.

    Reference: A. Daniely, R. Frostig, V. Gupta, Y. Singer. *Random Features for Compositional Kernels.*
    arXiv:1703.07872, 2017.

    Args:
        skeleton: The :class:`~gprf.features.Skeleton`.
        num_features: Number of feature columns ``F``.
        feature_map: A built :class:`~gprf.features.CompositionalFeatures` instead of its arguments.
        kwargs: The arguments of :class:`~gprf.features.CompositionalFeatures` — ``deduplicate`` (merge repeated
            monomials), ``max_draws``, ``seed`` — then GPyTorch ``Kernel`` arguments.

    Example:
        >>> skeleton = Skeleton.convolutional((8, 8), patch_size=3, num_layers=2, activation="relu")
        >>> covar_module = ScaleKernel(CompositionalRandomFeatureKernel(skeleton, num_features=1024))
    """

    feature_map_class = CompositionalFeatures

    def __init__(self, skeleton: Skeleton | None = None, num_features: int | None = None, **kwargs) -> None:
        building = kwargs.get("feature_map") is None
        num_dims = check_skeleton_dims(skeleton, kwargs, type(self).__name__) if building else None
        if skeleton is not None:
            kwargs["skeleton"] = skeleton  # a map argument (refused beside a built map)
        super().__init__(num_features, num_dims, **kwargs)
        if not building:
            check_skeleton_dims(self.skeleton, kwargs, type(self).__name__)

    @classmethod
    def build_feature_map(cls, num_dims: int, batch_shape: torch.Size, **map_arguments) -> FeatureMapBase:
        """The compositional features of the skeleton, which tells the input dimension."""
        return cls.feature_map_class(batch_shape=batch_shape, **map_arguments)

    @property
    def skeleton(self) -> Skeleton:
        return self.feature_map.skeleton

    def exact(self) -> Kernel:
        """A :class:`~gprf.kernels.exact.CompositionalKernel` of the same skeleton sharing this kernel's
        lengthscale."""
        exact = exact_target("compositional").build(
            skeleton=self.skeleton,
            ard_num_dims=self.ard_num_dims,
            batch_shape=self.batch_shape,
            active_dims=self.active_dims,
        )
        return self._tie_lengthscale(exact)
