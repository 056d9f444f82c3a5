"""The exact arc-cosine kernels of order 0 and 1: scale-free, without hyperparameters."""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from gprf.features.quadrature import arccos_kernel

LENGTHSCALE_KWARGS = ("ard_num_dims", "lengthscale_prior", "lengthscale_constraint")


def check_order(order: object, owner: str) -> int:
    """``order`` if it is 0 or 1 (the arc-cosine kernels with closed forms), else a ``ValueError`` naming ``owner``."""
    if isinstance(order, bool) or order not in (0, 1):
        raise ValueError(f"order must be 0 or 1 for {owner}, got {order!r}.")
    return order


def scale_free_error(order: int, what: str) -> ValueError:
    return ValueError(
        f"The arc-cosine kernel of order {order} is scale-free and has no lengthscale ({what}): k0(x/l, y/l) = "
        "k0(x, y) and k1(x/l, y/l) = k1(x, y)/l^2, so an isotropic lengthscale is at most an amplitude — wrap the "
        "kernel in ScaleKernel instead. For a lengthscale use the RBF kernel (QuadratureKernel)."
    )


class ArcCosineKernel(Kernel):
    r"""Exact arc-cosine kernel of order 0 or 1 (Cho & Saul, NeurIPS 2009), without hyperparameters.

    .. math::
        k_n(x, y) = 2\,E_{w\sim N(0, I)}\big[\Theta(w^\top x)\Theta(w^\top y)(w^\top x)^n(w^\top y)^n\big],
        \quad k_0 = 1 - \frac{\theta}{\pi}, \quad
        k_1 = \frac{\lVert x\rVert\lVert y\rVert}{\pi}\big(\sin\theta + (\pi - \theta)\cos\theta\big),

    with :math:`\theta` the angle between ``x`` and ``y`` (:math:`\pi/2` if either is zero). The kernels are
    scale-free (``k0`` is invariant to rescaling, ``k1`` homogeneous of degree one in each argument), so
    there is no lengthscale; wrap in :class:`~gpytorch.kernels.ScaleKernel` for an amplitude.

    Reference: Y. Cho, L. K. Saul. *Kernel Methods for Deep Learning.* Advances in Neural Information Processing
    Systems (NeurIPS), 2009.

    Args:
        order: 0 or 1.
        kwargs: GPyTorch :class:`~gpytorch.kernels.Kernel` arguments (``batch_shape``, ``active_dims``).
    """

    has_lengthscale = False

    def __init__(self, order: int = 1, **kwargs) -> None:
        check_order(order, "ArcCosineKernel")
        for name in LENGTHSCALE_KWARGS:
            if kwargs.get(name) is not None:
                raise scale_free_error(order, f"got {name}=")
        super().__init__(**kwargs)
        self.order = order

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params) -> Tensor:
        if last_dim_is_batch:
            raise NotImplementedError("ArcCosineKernel does not support last_dim_is_batch.")
        out = arccos_kernel(x1, x2, self.order, diag=diag)
        # No parameters carry the kernel's batch shape: broadcast to it explicitly.
        tail = 1 if diag else 2
        batch = torch.broadcast_shapes(self.batch_shape, out.shape[:-tail])
        return out.expand(*batch, *out.shape[-tail:])

    def __getitem__(self, index) -> Kernel:
        # GPyTorch infers the new batch shape from parameters and buffers; this kernel has none.
        new_kernel = super().__getitem__(index)
        if new_kernel is not self:
            index = index if isinstance(index, tuple) else (index,)
            new_kernel.batch_shape = torch.empty(self.batch_shape, device="meta")[index].shape
        return new_kernel
