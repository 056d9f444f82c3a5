r"""Compositional kernels of computation skeletons: exact and with compositional random features.

Reference: A. Daniely, R. Frostig, V. Gupta, Y. Singer. *Random Features for Compositional Kernels.*
arXiv:1703.07872, 2017.
"""

from __future__ import annotations

from gpytorch.kernels import Kernel
from torch import Tensor

from gprf.features import CompositionalFeatures, Skeleton
from gprf.kernels.feature_map_owner import resolve_num_dims
from gprf.kernels.random_feature_kernel import RandomFeatureKernel


def _check_dims(skeleton: Skeleton, kwargs: dict, owner: str) -> int:
    if not isinstance(skeleton, Skeleton):
        raise TypeError(f"{owner}: skeleton must be a gprf.features.Skeleton, got {type(skeleton).__name__}.")
    num_dims = resolve_num_dims(skeleton.input_dim, kwargs.get("ard_num_dims"), kwargs.get("active_dims"), owner)
    active_dims = kwargs.get("active_dims")
    if active_dims is not None and len(active_dims) != skeleton.input_dim:
        raise ValueError(
            f"{owner}: active_dims selects {len(active_dims)} columns but the skeleton reads {skeleton.input_dim}."
        )
    return num_dims


class CompositionalKernel(Kernel):
    r"""The exact compositional kernel of a :class:`~gprf.features.Skeleton` on :math:`x/\ell`.

    .. math::
        k_v(x, y) = \hat\sigma_v\Big(\frac{1}{|\mathrm{in}(v)|}\sum_{u\in\mathrm{in}(v)} k_u(x/\ell, y/\ell)\Big)

    with normalised base kernels at the input nodes (Daniely, Frostig & Singer 2016; Daniely et al. 2017, §5).
    The (optionally ARD) lengthscale is that of the Gaussian base kernel, and for the linear base kernel the scale
    of :math:`x` relative to the unit coordinate of :math:`[x_S, 1]`. Costs :math:`O(N^2)` per skeleton node:
    the reference for :class:`CompositionalRandomFeatureKernel`.

    Reference: A. Daniely, R. Frostig, Y. Singer. *Toward Deeper Understanding of Neural Networks: The Power of
    Initialization and a Dual View on Expressivity.* Advances in Neural Information Processing Systems (NeurIPS),
    2016.

    Reference: A. Daniely, R. Frostig, V. Gupta, Y. Singer. *Random Features for Compositional Kernels.*
    arXiv:1703.07872, 2017.

    Args:
        skeleton: The skeleton (its ``input_dim`` is the number of input columns).
        kwargs: GPyTorch :class:`~gpytorch.kernels.Kernel` arguments (``ard_num_dims``, ``batch_shape``, ...).
    """

    has_lengthscale = True

    def __init__(self, skeleton: Skeleton, **kwargs) -> None:
        _check_dims(skeleton, kwargs, "CompositionalKernel")
        super().__init__(**kwargs)
        self.skeleton = skeleton

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params) -> Tensor:
        if last_dim_is_batch:
            raise NotImplementedError("CompositionalKernel does not support last_dim_is_batch.")
        return self.skeleton.kernel(x1.div(self.lengthscale), x2.div(self.lengthscale), diag=diag)


class CompositionalRandomFeatureKernel(RandomFeatureKernel):
    r"""Compositional random features (Daniely et al. 2017, Alg. 1) of a skeleton kernel, as a GPyTorch kernel.

    :math:`\hat k(x, y) = \phi(x/\ell)^\top\phi(y/\ell)` with :math:`\phi` the
    :class:`~gprf.features.CompositionalFeatures` of ``skeleton``: every feature is a product of a few base
    random features along randomly sampled paths of the skeleton (one on average for ReLU and exponential
    skeletons, whatever the input dimension), repeated monomials merged with ``deduplicate=True``.

    Both base kernels are functions of :math:`x/\ell` (the Gaussian one is stationary, the linear one normalises
    :math:`[x_S/\ell, 1]`), so this kernel has a lengthscale (ARD with ``ard_num_dims``) and :meth:`exact` is a
    :class:`CompositionalKernel` tied to it.

    Reference: A. Daniely, R. Frostig, V. Gupta, Y. Singer. *Random Features for Compositional Kernels.*
    arXiv:1703.07872, 2017.

    Args:
        skeleton: The :class:`~gprf.features.Skeleton`.
        num_features: Number of feature columns ``F``.
        deduplicate: Merge repeated monomials (see :class:`~gprf.features.CompositionalFeatures`).
        seed: Seed of the draws.
        kwargs: GPyTorch ``Kernel`` arguments.

    Example:
        >>> skeleton = Skeleton.convolutional((8, 8), patch_size=3, num_layers=2, activation="relu")
        >>> covar_module = ScaleKernel(CompositionalRandomFeatureKernel(skeleton, num_features=1024))
    """

    def __init__(
        self, skeleton: Skeleton, num_features: int, deduplicate: bool = True, seed: int | None = None, **kwargs
    ) -> None:
        _check_dims(skeleton, kwargs, "CompositionalRandomFeatureKernel")
        feature_map = CompositionalFeatures(
            skeleton, num_features, deduplicate=deduplicate, batch_shape=kwargs.get("batch_shape", ()), seed=seed
        )
        super().__init__(feature_map, **kwargs)

    @property
    def skeleton(self) -> Skeleton:
        return self.feature_map.skeleton

    def exact(self) -> Kernel:
        """A :class:`CompositionalKernel` of the same skeleton sharing this kernel's lengthscale."""
        kwargs = dict(ard_num_dims=self.ard_num_dims, batch_shape=self.batch_shape, active_dims=self.active_dims)
        return self._tie_lengthscale(CompositionalKernel(self.skeleton, **kwargs))
