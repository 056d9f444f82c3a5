r"""Polynomial sketches of GPyTorch's polynomial kernel with its learnable offset."""

from __future__ import annotations

import torch
from gpytorch.constraints import Interval, Positive
from gpytorch.kernels import Kernel
from gpytorch.priors import Prior
from torch import Tensor

from gprf._checks import check_features_input
from gprf.features import FeatureMapBase, PolynomialSketch
from gprf.kernels.exact.targets import exact_target
from gprf.kernels.random_feature_kernel import RandomFeatureKernel

_BIAS_REFUSAL = (
    "OffsetPolynomialSketchKernel learns its offset c as the input coordinate sqrt(c): its sketch takes no bias "
    "(for a fixed bias and a lengthscale use PolynomialSketchKernel)."
)


class OffsetPolynomialSketchKernel(RandomFeatureKernel):
    r"""Polynomial sketch of GPyTorch's :class:`~gpytorch.kernels.PolynomialKernel`,
    :math:`k(x, y) = (x^\top y + c)^p` with a learnable offset :math:`c > 0` and no lengthscale.

    A sketch's ``bias`` is a constant fixed at construction (:class:`~gprf.kernels.PolynomialSketchKernel`), so
    it cannot carry GPyTorch's trainable offset. Appending :math:`\sqrt c` as a constant input coordinate can:
    with :math:`\tilde x = [x, \sqrt c]`, :math:`\tilde x^\top\tilde y = x^\top y + c`, so the unbiased sketch of
    the homogeneous kernel :math:`(\tilde x^\top\tilde y)^p` on :math:`d + 1` inputs is an unbiased estimate of
    the target for every value of :math:`c`, and gradients reach ``raw_offset`` through the extra coordinate.
    The parameter (``raw_offset``, its constraint and prior) is named as in GPyTorch's kernel, so :meth:`exact`
    shares it.

    Reference: J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal
    of Machine Learning Research, 2024 (arXiv:2201.08712).

    Args:
        num_features: Number of sketch features (complex features for ``complex=True``).
        num_dims: Input dimension :math:`d` (defaults to ``len(active_dims)``).
        feature_map: A built :class:`~gprf.features.PolynomialSketch` of :math:`d + 1` inputs without ``bias``,
            instead of its arguments.
        offset_prior, offset_constraint: As in GPyTorch's ``PolynomialKernel`` (default ``Positive()``).
        kwargs: The arguments of :class:`~gprf.features.PolynomialSketch` — ``degree`` :math:`p \ge 0` (an
            integer: GPyTorch's ``power``; default 2), ``sketch`` (``"gaussian"``, ``"rademacher"``, ``"srht"``,
            ``"tensorsketch"``), ``complex`` (the real-part kernel), ``seed``; the offset replaces ``bias`` — then
            GPyTorch ``Kernel`` arguments (``batch_shape``, ``active_dims``).
    """

    has_lengthscale = False
    feature_map_class = PolynomialSketch

    def __init__(
        self,
        num_features: int | FeatureMapBase | None = None,
        num_dims: int | None = None,
        *,
        offset_prior: Prior | None = None,
        offset_constraint: Interval | None = None,
        **kwargs,
    ) -> None:
        super().__init__(num_features, num_dims, **kwargs)
        self.num_dims = self.map_num_dims(self.feature_map)
        self.register_parameter("raw_offset", torch.nn.Parameter(torch.zeros(*self.batch_shape, 1)))
        self.register_constraint("raw_offset", Positive() if offset_constraint is None else offset_constraint)
        if offset_prior is not None:
            self.register_prior("offset_prior", offset_prior, lambda m: m.offset, lambda m, v: m._set_offset(v))

    @classmethod
    def build_feature_map(cls, num_dims: int, batch_shape: torch.Size, **map_arguments) -> FeatureMapBase:
        r"""The sketch of the :math:`d + 1` inputs :math:`[x, \sqrt c]` (the offset is an input, not a ``bias``)."""
        if "bias" in map_arguments:
            raise TypeError(_BIAS_REFUSAL)
        return super().build_feature_map(num_dims + 1, batch_shape, **map_arguments)

    @classmethod
    def check_feature_map(cls, feature_map: FeatureMapBase, num_dims: int | None, map_arguments: dict) -> None:
        super().check_feature_map(feature_map, num_dims, map_arguments)
        if feature_map.bias != 0:
            raise ValueError(_BIAS_REFUSAL)

    @classmethod
    def map_num_dims(cls, feature_map: FeatureMapBase) -> int:
        """:math:`d`: the sketch reads :math:`d + 1` inputs."""
        return feature_map.input_dim - 1

    @property
    def degree(self) -> int:
        return self.feature_map.degree

    @property
    def offset(self) -> Tensor:
        """:math:`c`, shape ``(*batch_shape, 1)`` as in GPyTorch's ``PolynomialKernel``."""
        return self.raw_offset_constraint.transform(self.raw_offset)

    @offset.setter
    def offset(self, value: float | Tensor) -> None:
        self._set_offset(value)

    def _set_offset(self, value: float | Tensor) -> None:
        value = torch.as_tensor(value).to(self.raw_offset)
        self.initialize(raw_offset=self.raw_offset_constraint.inverse_transform(value))

    def augment(self, x: Tensor) -> Tensor:
        r""":math:`[x, \sqrt c]` for raw inputs ``x`` of shape ``(..., n, d)``: what the sketch sees."""
        check_features_input(x, self.num_dims, type(self).__name__)
        root_offset = self.offset.sqrt().unsqueeze(-1).to(x.dtype)  # (*batch, 1, 1)
        batch_shape = torch.broadcast_shapes(x.shape[:-2], root_offset.shape[:-2])
        column = root_offset.expand(*batch_shape, x.size(-2), 1)
        return torch.cat([x.expand(*batch_shape, *x.shape[-2:]), column], dim=-1)

    def features(self, x: Tensor) -> Tensor:
        """The sketch's real root at :math:`[x, \\sqrt c]`."""
        return self.feature_map.real_features(self.augment(x))

    def expected_kernel(self, x1: Tensor, x2: Tensor) -> Tensor:
        """:math:`E[\\hat k(x1_i, x2_i)] = (x1_i^\\top x2_i + c)^p` row by row (raw inputs)."""
        return self.feature_map.expected_kernel(self.augment(x1), self.augment(x2))

    def variance(self, x1: Tensor, x2: Tensor, part: str = "real") -> Tensor:
        """The sketch's closed-form variance at the augmented inputs, row by row (raw inputs)."""
        return self.feature_map.variance(self.augment(x1), self.augment(x2), part)

    def exact(self) -> Kernel:
        """GPyTorch's ``PolynomialKernel`` sharing this kernel's offset parameter and constraint."""
        exact = exact_target("offset_polynomial").build(
            power=self.degree, batch_shape=self.batch_shape, active_dims=self.active_dims
        )
        exact.raw_offset = self.raw_offset
        exact.register_constraint("raw_offset", self.raw_offset_constraint)
        return exact.to(self.raw_offset)
