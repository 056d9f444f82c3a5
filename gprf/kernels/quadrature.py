"""Quadrature-based feature kernels SR(3,3) and the exact arc-cosine kernels (paper 003)."""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel, RBFKernel
from torch import Tensor

from gprf._checks import check_choice
from gprf.features import QuadratureFeatures
from gprf.features.quadrature import QUADRATURE_KERNELS, arccos_kernel
from gprf.kernels.random_feature_kernel import RandomFeatureKernel, resolve_num_dims

_LENGTHSCALE_KWARGS = ("ard_num_dims", "lengthscale_prior", "lengthscale_constraint")


def _scale_free_error(kernel: str, what: str) -> ValueError:
    return ValueError(
        f"The {kernel!r} kernel is scale-free and has no lengthscale ({what}): k0(x/l, y/l) = k0(x, y) and "
        "k1(x/l, y/l) = k1(x, y)/l^2, so an isotropic lengthscale is at most an amplitude — wrap the kernel in "
        "ScaleKernel instead. Pass num_dims= for the input dimension, or use kernel='rbf' for a lengthscale."
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

    Args:
        order: 0 or 1.
        kwargs: GPyTorch :class:`~gpytorch.kernels.Kernel` arguments (``batch_shape``, ``active_dims``).
    """

    has_lengthscale = False

    def __init__(self, order: int = 1, **kwargs) -> None:
        if isinstance(order, bool) or order not in (0, 1):
            raise ValueError(f"order must be 0 or 1 for ArcCosineKernel, got {order!r}.")
        for name in _LENGTHSCALE_KWARGS:
            if kwargs.get(name) is not None:
                raise _scale_free_error(f"arccos{order}", f"got {name}=")
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


class QuadratureKernel(RandomFeatureKernel):
    r"""SR(3,3) quadrature-feature approximation of the RBF or an arc-cosine kernel (paper 003).

    :math:`\hat k(x, y) = \phi(x)^\top\phi(y)` with :math:`\phi` the
    :class:`~gprf.features.QuadratureFeatures` of ``num_rules`` stochastic spherical-radial rules
    (``2 * num_rules * (p + 1)`` features, ``p`` the input dimension, padded to a power of two for
    ``rotation="butterfly"``; see :attr:`num_features`).

    * ``kernel="rbf"``: GPyTorch's RBF kernel :math:`e^{-\lVert x - y\rVert^2/2\ell^2}`; inputs are divided
      by the (ARD) lengthscale before featurization, and :meth:`exact` is a tied ``RBFKernel``.
    * ``kernel="arccos0"``/``"arccos1"``: arc-cosine kernels, which are scale-free: the kernel has **no
      lengthscale** (``has_lengthscale`` is ``False`` for these instances, ``kernel.lengthscale`` is ``None``);
      passing ``ard_num_dims``, ``lengthscale_prior`` or ``lengthscale_constraint``, or assigning a lengthscale,
      raises a ``ValueError``. :meth:`exact` is :class:`ArcCosineKernel`.

    Args:
        num_rules: Number of SR(3,3) rules ``n >= 1``.
        num_dims: Input dimension (defaults to ``ard_num_dims`` or ``len(active_dims)``).
        kernel: ``"rbf"``, ``"arccos0"`` or ``"arccos1"``.
        rotation: ``"haar"`` (exactly unbiased) or ``"butterfly"`` (:math:`O(d\log d)`).
        seed: Seed of the feature draws (``None``: from the global RNG).
        kwargs: GPyTorch :class:`~gpytorch.kernels.Kernel` arguments.

    Example:
        >>> covar_module = ScaleKernel(QuadratureKernel(num_rules=4, num_dims=8, ard_num_dims=8))
        >>> relu_kernel = ScaleKernel(QuadratureKernel(num_rules=4, num_dims=8, kernel="arccos1"))
    """

    def __init__(
        self,
        num_rules: int,
        num_dims: int | None = None,
        kernel: str = "rbf",
        rotation: str = "haar",
        seed: int | None = None,
        **kwargs,
    ) -> None:
        kernel = check_choice(kernel, "kernel", QUADRATURE_KERNELS)
        scale_free = kernel != "rbf"
        if scale_free:
            for name in _LENGTHSCALE_KWARGS:
                if kwargs.get(name) is not None:
                    raise _scale_free_error(kernel, f"got {name}=")
        num_dims = resolve_num_dims(num_dims, kwargs.get("ard_num_dims"), kwargs.get("active_dims"), "QuadratureKernel")
        feature_map = QuadratureFeatures(
            num_dims,
            num_rules,
            kernel=kernel,
            rotation=rotation,
            batch_shape=kwargs.get("batch_shape", torch.Size()),
            seed=seed,
        )
        # Per instance: gpytorch's Kernel.__init__ reads has_lengthscale to create raw_lengthscale.
        object.__setattr__(self, "has_lengthscale", not scale_free)
        super().__init__(feature_map, **kwargs)

    def _set_lengthscale(self, value: Tensor | float) -> None:
        if not self.has_lengthscale:
            raise _scale_free_error(self.feature_map.kernel, "cannot set lengthscale")
        super()._set_lengthscale(value)

    def scale_inputs(self, x: Tensor) -> Tensor:
        """``x / lengthscale`` for RBF; the inputs unchanged for the scale-free arc-cosine kernels."""
        if self.has_lengthscale:
            return super().scale_inputs(x)
        return x

    def __getitem__(self, index) -> Kernel:
        new_kernel = super().__getitem__(index)
        if new_kernel is not self and not self.has_lengthscale:
            # No lengthscale to infer the batch shape from: the indexed feature draws carry it.
            new_kernel.batch_shape = new_kernel.feature_map.batch_shape
        return new_kernel

    def _state_set(self, attribute: str) -> set:
        values = {getattr(param, attribute) for param in self.parameters()}
        return values | {getattr(self.feature_map.radii, attribute)}

    @property
    def device(self) -> torch.device | None:
        """The lengthscale's device (RBF), else that of the parameters and the feature draws."""
        if self.has_lengthscale:
            return super().device
        devices = self._state_set("device")
        if len(devices) > 1:
            raise RuntimeError(f"The kernel's parameters and feature draws are on multiple devices: {devices}.")
        return devices.pop()

    @property
    def dtype(self) -> torch.dtype:
        """The lengthscale's dtype (RBF), else that of the parameters and the feature draws."""
        if self.has_lengthscale:
            return super().dtype
        dtypes = self._state_set("dtype")
        if len(dtypes) > 1:
            raise RuntimeError(f"The kernel's parameters have multiple dtypes (feature draws included): {dtypes}.")
        return dtypes.pop()

    def exact(self) -> Kernel:
        """A tied ``RBFKernel`` (same lengthscale parameter) or an :class:`ArcCosineKernel`."""
        kwargs = dict(batch_shape=self.batch_shape, active_dims=self.active_dims)
        name = self.feature_map.kernel
        if name == "rbf":
            return self._tie_lengthscale(RBFKernel(ard_num_dims=self.ard_num_dims, **kwargs))
        return ArcCosineKernel(order=int(name[-1]), **kwargs).to(self.feature_map.radii)
