r"""The exact compositional kernel of a computation skeleton.

Reference: A. Daniely, R. Frostig, V. Gupta, Y. Singer. *Random Features for Compositional Kernels.*
arXiv:1703.07872, 2017.
"""

from __future__ import annotations

from gpytorch.kernels import Kernel
from torch import Tensor

from gprf._checks import resolve_num_dims
from gprf.features import Skeleton


def check_skeleton_dims(skeleton: Skeleton, kwargs: dict, owner: str) -> int:
    """The input dimension of a kernel of ``skeleton``, checked against its GPyTorch arguments ``kwargs``
    (``ard_num_dims``, ``active_dims``)."""
    if not isinstance(skeleton, Skeleton):
        raise TypeError(f"{owner}: skeleton must be a gprf.features.Skeleton, got {type(skeleton).__name__}.")
    active_dims = kwargs.get("active_dims")
    if active_dims is not None and len(active_dims) != skeleton.input_dim:
        raise ValueError(
            f"{owner}: active_dims selects {len(active_dims)} columns but the skeleton reads {skeleton.input_dim}."
        )
    return resolve_num_dims(skeleton.input_dim, kwargs.get("ard_num_dims"), active_dims, owner)


class CompositionalKernel(Kernel):
    r"""The exact compositional kernel of a :class:`~gprf.features.Skeleton` on :math:`x/\ell`.

    .. math::
        k_v(x, y) = \hat\sigma_v\Big(\frac{1}{|\mathrm{in}(v)|}\sum_{u\in\mathrm{in}(v)} k_u(x/\ell, y/\ell)\Big)

    with normalised base kernels at the input nodes (Daniely, Frostig & Singer 2016; Daniely et al. 2017, §5).
    The (optionally ARD) lengthscale is that of the Gaussian base kernel, and for the linear base kernel the scale
    of :math:`x` relative to the unit coordinate of :math:`[x_S, 1]`. Costs :math:`O(N^2)` per skeleton node:
    the reference for :class:`~gprf.kernels.CompositionalRandomFeatureKernel`.

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
        check_skeleton_dims(skeleton, kwargs, "CompositionalKernel")
        super().__init__(**kwargs)
        self.skeleton = skeleton

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params) -> Tensor:
        if last_dim_is_batch:
            raise NotImplementedError("CompositionalKernel does not support last_dim_is_batch.")
        return self.skeleton.kernel(x1.div(self.lengthscale), x2.div(self.lengthscale), diag=diag)
