"""What a GPyTorch kernel that owns a random feature map of lengthscale-scaled inputs needs, whatever its roots."""

from __future__ import annotations

import inspect
import itertools
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from typing import ClassVar

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from gprf._checks import resolve_num_dims
from gprf.features import FeatureMapBase

#: The named arguments of GPyTorch's ``Kernel`` (what a family kernel passes on besides its map's arguments).
GPYTORCH_KERNEL_ARGUMENTS = tuple(
    name
    for name, parameter in inspect.signature(Kernel.__init__).parameters.items()
    if name != "self" and parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
)


class FeatureMapOwner(ABC):
    """Mixin of the kernels that own a random feature map: :class:`~gprf.kernels.RandomFeatureKernel` (one root)
    and :class:`~gprf.kernels.SignedRandomFeatureKernel` (two roots).

    The map sees the inputs divided by the (ARD) lengthscale (:meth:`scale_inputs`); its draws are buffers with
    the kernel's ``batch_shape`` (or none, one draw shared by the batch) that follow ``.to()``, ``state_dict`` and
    pickling, stay fixed during training and are redrawn by :meth:`resample_features`. Kernels of scale-free
    targets set ``has_lengthscale = False``: their inputs reach the map unscaled.

    **Construction.** A kernel owns a built map, ``Kernel(feature_map=feature_map, **kernel_kwargs)`` (the map may
    also come first), or builds it from the map's own arguments: a family declares its map class
    (:attr:`feature_map_class`), and every argument named in that class's constructor passes through to it — the
    number of features (``num_features``, or the map's own name for it, e.g. ``num_rules``), ``seed``, the
    target's name, the sampler... — while the rest are GPyTorch ``Kernel`` arguments. The map's ``input_dim`` is the
    kernel's ``num_dims`` (default ``ard_num_dims``, else ``len(active_dims)``) and its ``batch_shape`` the
    kernel's. So ``RandomFourierKernel(512, num_dims=3, kernel="matern52", seed=0, ard_num_dims=3)`` is
    ``RandomFourierKernel(feature_map=RandomFourierFeatures(3, 512, kernel="matern52", seed=0), ard_num_dims=3)``,
    and an argument added to a map is an argument of its kernel without editing the kernel. A family whose map needs
    more than that overrides :meth:`build_feature_map` (and :meth:`check_feature_map` for built maps).
    """

    has_lengthscale = True
    #: The map class the kernel builds from the map's arguments (``None``: the kernel only takes built maps).
    feature_map_class: ClassVar[type[FeatureMapBase] | None] = None

    def __init__(
        self,
        num_features: int | FeatureMapBase | None = None,
        num_dims: int | None = None,
        *,
        feature_map: FeatureMapBase | None = None,
        **kwargs,
    ) -> None:
        if isinstance(num_features, FeatureMapBase):  # the built map given first
            if feature_map is not None:
                raise TypeError(f"{type(self).__name__} got two feature maps (positional and feature_map=).")
            num_features, feature_map = None, num_features
        if feature_map is None and self.feature_map_class is None:
            raise TypeError(f"{type(self).__name__} takes a built map: pass feature_map=.")
        if num_features is not None:
            kwargs[self.size_argument()] = num_features
        map_arguments = self.take_map_arguments(kwargs)
        ard_num_dims = kwargs.get("ard_num_dims") if self.has_lengthscale else None
        if feature_map is None:
            num_dims = resolve_num_dims(num_dims, ard_num_dims, kwargs.get("active_dims"), type(self).__name__)
            feature_map = self.build_feature_map(num_dims, torch.Size(kwargs.get("batch_shape") or ()), **map_arguments)
        else:
            self.check_feature_map(feature_map, num_dims, map_arguments)
            resolve_num_dims(self.map_num_dims(feature_map), ard_num_dims, None, type(self).__name__)
        super().__init__(**kwargs)
        # A map without batch dimensions is shared by every batch member (one draw for all outputs/classes).
        if feature_map.batch_shape not in (torch.Size(), self.batch_shape):
            raise ValueError(
                f"feature_map.batch_shape {tuple(feature_map.batch_shape)} differs from the kernel's "
                f"batch_shape {tuple(self.batch_shape)}; use a map with the kernel's batch_shape (independent "
                "draws per batch member) or without batch dimensions (one shared draw)."
            )
        self.feature_map = feature_map

    @classmethod
    def take_map_arguments(cls, kwargs: dict) -> dict:
        """Remove the map's arguments from ``kwargs`` and return them; what is left must be GPyTorch's."""
        map_arguments = {name: kwargs.pop(name) for name in cls.map_argument_names() if name in kwargs}
        unknown = sorted(set(kwargs) - set(GPYTORCH_KERNEL_ARGUMENTS))
        if unknown:
            takes = (
                f"the arguments of {cls.feature_map_class.__name__} ({', '.join(cls.map_argument_names())})"
                if cls.feature_map_class is not None
                else "feature_map="
            )
            raise TypeError(
                f"{cls.__name__} got unexpected arguments {', '.join(unknown)}: it takes {takes} and GPyTorch "
                f"Kernel arguments ({', '.join(GPYTORCH_KERNEL_ARGUMENTS)})."
            )
        return map_arguments

    @classmethod
    def size_argument(cls) -> str:
        """The name of the map's size, its argument after the input dimension (``num_features``, ``num_rules``,
        ...): what the kernel's first argument is."""
        if cls.feature_map_class is None:
            return "num_features"
        return list(inspect.signature(cls.feature_map_class).parameters)[1]

    @classmethod
    def map_argument_names(cls) -> tuple[str, ...]:
        """The arguments of :attr:`feature_map_class` a kernel passes through: all but ``input_dim`` and
        ``batch_shape``, which come from the kernel, including those a map's ``**kwargs`` hand to its base class."""
        if cls.feature_map_class is None:
            return ()
        names: list[str] = []
        for map_class in cls.feature_map_class.__mro__:
            if "__init__" not in vars(map_class):
                continue
            parameters = list(inspect.signature(map_class.__init__).parameters.values())[1:]  # without self
            names += [
                parameter.name
                for parameter in parameters
                if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
                and parameter.name not in ("input_dim", "batch_shape", *names)
            ]
            if all(parameter.kind is not parameter.VAR_KEYWORD for parameter in parameters):
                break
        return tuple(names)

    @classmethod
    def build_feature_map(cls, num_dims: int, batch_shape: torch.Size, **map_arguments) -> FeatureMapBase:
        """The map built from its arguments for the kernel's input dimension and batch shape:
        ``feature_map_class(num_dims, batch_shape=batch_shape, **map_arguments)``."""
        return cls.feature_map_class(num_dims, batch_shape=batch_shape, **map_arguments)

    @classmethod
    def check_feature_map(cls, feature_map: FeatureMapBase, num_dims: int | None, map_arguments: dict) -> None:
        """Refuse a built map the kernel cannot own (another class than :attr:`feature_map_class`, another
        ``num_dims``) or that comes with map arguments."""
        if map_arguments:
            raise TypeError(
                f"{cls.__name__} got feature_map= and the map arguments {', '.join(sorted(map_arguments))}: pass "
                "either a built map or the arguments to build one."
            )
        expected = cls.feature_map_class or FeatureMapBase
        if not isinstance(feature_map, expected):
            raise TypeError(
                f"{cls.__name__} needs a {expected.__name__} feature map, got {type(feature_map).__name__}."
            )
        if num_dims is not None and num_dims != cls.map_num_dims(feature_map):
            raise ValueError(
                f"{cls.__name__}: num_dims={num_dims} does not match the feature map's input dimension "
                f"({cls.map_num_dims(feature_map)}); drop num_dims (the map tells it)."
            )

    @classmethod
    def map_num_dims(cls, feature_map: FeatureMapBase) -> int:
        """The kernel's input dimension for a map: the map's ``input_dim``."""
        return feature_map.input_dim

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
        reference = next(itertools.chain(self.parameters(), self.feature_map.buffers()), None)
        if reference is not None and reference.device != x.device:
            raise ValueError(
                f"{type(self).__name__} is on device {reference.device} but got inputs on {x.device}; move one to the "
                f"other (kernel.to({str(x.device)!r}) or x.to({str(reference.device)!r}))."
            )
        try:
            torch.broadcast_shapes(x.shape[:-2], self.batch_shape)
        except RuntimeError:
            raise ValueError(
                f"{type(self).__name__} has batch_shape {tuple(self.batch_shape)}, which does not broadcast with the "
                f"batch dimensions {tuple(x.shape[:-2])} of inputs of shape {tuple(x.shape)}; pass inputs of shape "
                f"(*batch, n, d) with batch broadcasting to {tuple(self.batch_shape)}, or build the kernel with a "
                "matching batch_shape."
            ) from None
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
