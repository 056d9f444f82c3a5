r"""The linear kernel as a feature kernel with an exact root."""

from __future__ import annotations

import torch
from gpytorch.constraints import Interval, Positive
from gpytorch.kernels import Kernel
from gpytorch.priors import Prior
from torch import Tensor

from gprf._checks import check_features_input, resolve_num_dims
from gprf.kernels.exact.targets import exact_target
from gprf.kernels.feature_kernel import FeatureKernel


class LinearFeatureKernel(FeatureKernel):
    r"""GPyTorch's linear kernel :math:`k(x, y) = \sum_j v_j x_j y_j` with its exact root :math:`r(x) = \sqrt v\odot x`.

    Nothing is random: the root has ``num_dims`` columns and reproduces :class:`~gpytorch.kernels.LinearKernel`
    exactly (``v`` is one variance, or one per input dimension with ``ard_num_dims``). As a feature kernel it
    joins sums (concatenated roots) and products of feature kernels without making the covariance dense: a
    linear trend beside random Fourier features costs :math:`d` more columns of the root. The parameters
    (``raw_variance``, its constraint and prior) are named as in GPyTorch's kernel, so :meth:`exact` shares them.

    Args:
        num_dims: Input dimension :math:`d` (defaults to ``ard_num_dims`` or ``len(active_dims)``).
        variance_prior, variance_constraint: As in GPyTorch's ``LinearKernel`` (default ``Positive()``).
        kwargs: GPyTorch ``Kernel`` arguments (``ard_num_dims``, ``batch_shape``, ``active_dims``).
    """

    def __init__(
        self,
        num_dims: int | None = None,
        variance_prior: Prior | None = None,
        variance_constraint: Interval | None = None,
        **kwargs,
    ) -> None:
        self.num_dims = resolve_num_dims(
            num_dims, kwargs.get("ard_num_dims"), kwargs.get("active_dims"), "LinearFeatureKernel"
        )
        super().__init__(**kwargs)
        size = 1 if self.ard_num_dims is None else self.ard_num_dims
        self.register_parameter("raw_variance", torch.nn.Parameter(torch.zeros(*self.batch_shape, 1, size)))
        self.register_constraint("raw_variance", Positive() if variance_constraint is None else variance_constraint)
        if variance_prior is not None:
            self.register_prior("variance_prior", variance_prior, lambda m: m.variance, lambda m, v: m._set_variance(v))

    @property
    def variance(self) -> Tensor:
        """:math:`v`, shape ``(*batch_shape, 1, 1 or d)`` as in GPyTorch's ``LinearKernel``."""
        return self.raw_variance_constraint.transform(self.raw_variance)

    @variance.setter
    def variance(self, value: float | Tensor) -> None:
        self._set_variance(value)

    def _set_variance(self, value: float | Tensor) -> None:
        value = torch.as_tensor(value).to(self.raw_variance)
        self.initialize(raw_variance=self.raw_variance_constraint.inverse_transform(value))

    @property
    def root_dim(self) -> int:
        return self.num_dims

    def features(self, x: Tensor) -> Tensor:
        """The exact root :math:`\\sqrt v\\odot x` of raw inputs."""
        check_features_input(x, self.num_dims, type(self).__name__)
        root = x * self.variance.sqrt()
        return root.expand(*torch.broadcast_shapes(root.shape[:-2], self.batch_shape), *root.shape[-2:])

    def exact(self) -> Kernel:
        """GPyTorch's ``LinearKernel`` sharing this kernel's variance parameter, constraint and prior."""
        exact = exact_target("linear").build(
            ard_num_dims=self.ard_num_dims, batch_shape=self.batch_shape, active_dims=self.active_dims
        )
        exact.raw_variance = self.raw_variance
        exact.register_constraint("raw_variance", self.raw_variance_constraint)
        return exact.to(self.raw_variance)
