"""What a GPyTorch kernel that owns a random feature map of lengthscale-scaled inputs needs, whatever its roots."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from gprf.features import FeatureMapBase


def resolve_num_dims(num_dims: int | None, ard_num_dims: int | None, active_dims, owner: str) -> int:
    """The input dimension a random-feature kernel is built for (its buffers need it up front)."""
    if num_dims is None:
        num_dims = ard_num_dims
    if num_dims is None and active_dims is not None:
        num_dims = len(active_dims)
    if num_dims is None:
        raise ValueError(
            f"{owner} needs the input dimension to draw its features at construction: pass num_dims=d "
            "(or ard_num_dims=d)."
        )
    if ard_num_dims is not None and ard_num_dims not in (1, num_dims):
        raise ValueError(f"{owner}: ard_num_dims={ard_num_dims} does not match num_dims={num_dims}.")
    return num_dims


class FeatureMapOwner(ABC):
    """Mixin of the kernels that own a random feature map: :class:`~gprf.kernels.RandomFeatureKernel` (one root)
    and :class:`~gprf.kernels.SignedRandomFeatureKernel` (two roots).

    The map sees the inputs divided by the (ARD) lengthscale (:meth:`scale_inputs`); its draws are buffers with
    the kernel's ``batch_shape`` (or none, one draw shared by the batch) that follow ``.to()``, ``state_dict`` and
    pickling, stay fixed during training and are redrawn by :meth:`resample_features`. Kernels of scale-free
    targets set ``has_lengthscale = False``: their inputs reach the map unscaled.
    """

    has_lengthscale = True

    def __init__(self, feature_map: FeatureMapBase, **kwargs) -> None:
        super().__init__(**kwargs)
        # A map without batch dimensions is shared by every batch member (one draw for all outputs/classes).
        if feature_map.batch_shape not in (torch.Size(), self.batch_shape):
            raise ValueError(
                f"feature_map.batch_shape {tuple(feature_map.batch_shape)} differs from the kernel's "
                f"batch_shape {tuple(self.batch_shape)}; use a map with the kernel's batch_shape (independent "
                "draws per batch member) or without batch dimensions (one shared draw)."
            )
        self.feature_map = feature_map

    @property
    def num_features(self) -> int:
        """The feature map's number of features (see :class:`~gprf.features.FeatureMapBase`)."""
        return self.feature_map.num_features

    def _set_lengthscale(self, value: Tensor | float) -> None:
        value = torch.as_tensor(value)
        if not bool((value > 0).all()):
            raise ValueError(f"lengthscale must be positive, got {value}.")
        super()._set_lengthscale(value)

    def scale_inputs(self, x: Tensor) -> Tensor:
        """``x / lengthscale`` (what the feature map sees), in the promoted dtype of both, as GPyTorch's kernels."""
        if x.dim() < 2 or x.size(-1) != self.feature_map.input_dim:
            raise ValueError(
                f"{type(self).__name__} was built for inputs with {self.feature_map.input_dim} columns (num_dims) "
                f"but got inputs of shape {tuple(x.shape)}; pass inputs of shape (..., n, "
                f"{self.feature_map.input_dim}) or build the kernel with num_dims={x.size(-1)}."
            )
        return x / self.lengthscale if self.has_lengthscale else x

    def resample_features(self, generator: torch.Generator | None = None) -> None:
        """Redraw the random features in place (see :meth:`gprf.features.FeatureMapBase.resample`)."""
        self.feature_map.resample(generator)

    def resize_features(self, num_features: int, generator: torch.Generator | None = None):
        """Replace the feature map by ``feature_map.resized(num_features, generator)``, in place; returns ``self``.

        The smaller map's draws are a prefix of the larger map's (see
        :meth:`gprf.features.FeatureMapBase.resized`); the hyperparameters are untouched, so a kernel tuned with
        few features conditions with many on the same hyperparameters. Raises ``NotImplementedError`` for maps
        whose draws cannot nest.
        """
        self.feature_map = self.feature_map.resized(num_features, generator)
        return self

    @contextmanager
    def features_resized(self, num_features: int, generator: torch.Generator | None = None) -> Iterator:
        """Within the block, the kernel uses ``feature_map.resized(num_features, generator)``; afterwards (also
        after an exception) the original map object is back.

        Example:
            >>> with model.covar_module.base_kernel.features_resized(64):
            ...     loss = -mll(model(train_x), train_y)  # a training step with 64 of the features
        """
        original = self.feature_map
        self.feature_map = original.resized(num_features, generator)
        try:
            yield self
        finally:
            self.feature_map = original

    def share_features(self):
        """Use one feature draw (batch member 0's) for every batch member, in place; returns ``self``.

        Batch members (outputs, classes) keep their own hyperparameters but share the random features, so
        their approximation errors are alike and the feature buffers are ``batch_shape`` times smaller.
        """
        if len(self.feature_map.batch_shape) > 0:
            first = self.feature_map.batch_index((0,) * len(self.feature_map.batch_shape))
            self.feature_map = first._map_random_buffers(torch.Tensor.clone, torch.Size())
        return self

    @abstractmethod
    def exact(self) -> Kernel:
        """The exact target kernel, sharing this kernel's hyperparameters (for metrics and comparisons)."""

    def _tie_lengthscale(self, exact: Kernel) -> Kernel:
        """Make ``exact`` share this kernel's lengthscale parameter and constraint (one source of truth)."""
        exact.raw_lengthscale = self.raw_lengthscale
        exact.register_constraint("raw_lengthscale", self.raw_lengthscale_constraint)
        return exact.to(self.raw_lengthscale)

    # Without a lengthscale, GPyTorch reads dtype and device from the parameters alone; the draws count too.
    def _state_tensors(self) -> list[Tensor]:
        return [*self.parameters(), *self.feature_map.buffers()]

    @property
    def device(self) -> torch.device | None:
        """The lengthscale's device, else that of the parameters and the feature draws."""
        if self.has_lengthscale:
            return super().device
        devices = {tensor.device for tensor in self._state_tensors()}
        if len(devices) > 1:
            raise RuntimeError(f"The kernel's parameters and feature draws are on multiple devices: {devices}.")
        return devices.pop() if devices else None

    @property
    def dtype(self) -> torch.dtype:
        """The lengthscale's dtype, else that of the parameters and the feature draws."""
        if self.has_lengthscale:
            return super().dtype
        dtypes = {tensor.dtype for tensor in self._state_tensors() if tensor.is_floating_point()}
        if len(dtypes) > 1:
            raise RuntimeError(f"The kernel's parameters have multiple dtypes (feature draws included): {dtypes}.")
        return dtypes.pop() if dtypes else torch.get_default_dtype()

    # Keep the feature draws aligned with the batch of the hyperparameters.
    def __getitem__(self, index) -> Kernel:
        new_kernel = super().__getitem__(index)
        if new_kernel is not self:
            new_kernel.feature_map = self.feature_map.batch_index(index if isinstance(index, tuple) else (index,))
            if not self.has_lengthscale:
                # No lengthscale to infer the batch shape from: the indexed draws carry it.
                new_kernel.batch_shape = new_kernel.feature_map.batch_shape
        return new_kernel

    def expand_batch(self, *sizes) -> Kernel:
        new_kernel = super().expand_batch(*sizes)
        if new_kernel is not self and len(self.feature_map.batch_shape) > 0:
            new_kernel.feature_map = self.feature_map.batch_expand(new_kernel.batch_shape)
        return new_kernel
