r"""The exact first- and second-order additive (ANOVA) stationary kernels,

.. math::
    k(x, y) = \sum_{j=1}^d k_0\Big(\frac{x_j - y_j}{\ell_j}\Big)
      + \tau \sum_{i<j} k_0\Big(\frac{x_i - y_i}{\ell_i}\Big)\,k_0\Big(\frac{x_j - y_j}{\ell_j}\Big),

with :math:`k_0` the unit-lengthscale RBF or Matérn profile (or another stationary spectrum's), :math:`\ell` an (ARD)
lengthscale and :math:`\tau \ge 0` the interaction variance (second order only). The first term is GPyTorch's
``AdditiveStructureKernel(RBFKernel(...), num_dims=d)``; with both terms it is the additive kernel of Duvenaud,
Nickisch & Rasmussen (2011) truncated at order two, the overall amplitude coming from a ``ScaleKernel``.

Reference: D. Duvenaud, H. Nickisch, C. E. Rasmussen. *Additive Gaussian Processes.* Advances in Neural Information
Processing Systems (NeurIPS), 2011.
"""

from __future__ import annotations

import torch
from gpytorch.constraints import Interval, Positive
from gpytorch.kernels import Kernel
from gpytorch.priors import Prior
from torch import Tensor

from gprf.features.additive import ADDITIVE_ORDERS
from gprf.features.spectral import StationarySpectrum, stationary_spectrum


class InteractionVariance:
    """The positive interaction variance :math:`\\tau` of second-order additive kernels (a mixin of the exact kernel
    and of :class:`~gprf.kernels.AdditiveFeatureKernel`)."""

    def _register_interaction_variance(self, prior: Prior | None, constraint: Interval | None) -> None:
        self.register_parameter("raw_interaction_variance", torch.nn.Parameter(torch.zeros(*self.batch_shape, 1)))
        self.register_constraint("raw_interaction_variance", Positive() if constraint is None else constraint)
        if prior is not None:
            self.register_prior(
                "interaction_variance_prior",
                prior,
                lambda m: m.interaction_variance,
                lambda m, v: m._set_interaction_variance(v),
            )

    @property
    def interaction_variance(self) -> Tensor:
        """:math:`\\tau`, shape ``(*batch_shape, 1)``."""
        return self.raw_interaction_variance_constraint.transform(self.raw_interaction_variance)

    @interaction_variance.setter
    def interaction_variance(self, value: float | Tensor) -> None:
        self._set_interaction_variance(value)

    def _set_interaction_variance(self, value: float | Tensor) -> None:
        value = torch.as_tensor(value).to(self.raw_interaction_variance)
        self.initialize(raw_interaction_variance=self.raw_interaction_variance_constraint.inverse_transform(value))


class ExactAdditiveKernel(InteractionVariance, Kernel):
    r"""The exact first- or second-order additive stationary kernel of the module docstring.

    Order one equals GPyTorch's ``AdditiveStructureKernel(RBFKernel(ard_num_dims=d), num_dims=d)`` (deprecated
    there); the second-order term is the second elementary symmetric polynomial of the one-dimensional kernels,
    :math:`e_2 = (e_1^2 - \sum_j k_j^2)/2` (Newton's identity, as Duvenaud, Nickisch & Rasmussen 2011 compute it).
    Costs :math:`O(NMd)` memory for an :math:`N\times M` block.

    Args:
        kernel: ``"rbf"``, ``"matern12"``, ``"matern32"``, ``"matern52"``, or the
            :class:`~gprf.features.StationarySpectrum` of another stationary kernel.
        order: 1 or 2.
        interaction_variance_prior, interaction_variance_constraint: For :math:`\tau` (order 2; default
            ``Positive()``).
        kwargs: GPyTorch ``Kernel`` arguments.
    """

    has_lengthscale = True

    def __init__(
        self,
        kernel: str | StationarySpectrum = "rbf",
        order: int = 1,
        interaction_variance_prior: Prior | None = None,
        interaction_variance_constraint: Interval | None = None,
        **kwargs,
    ) -> None:
        spectrum = stationary_spectrum(kernel)
        if order not in ADDITIVE_ORDERS:
            raise ValueError(f"order must be 1 or 2 (first- or second-order additive kernel), got {order!r}.")
        super().__init__(**kwargs)
        self.spectrum, self.kernel, self.order = spectrum, spectrum.name, order
        if order == 2:
            self._register_interaction_variance(interaction_variance_prior, interaction_variance_constraint)

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params) -> Tensor:
        if last_dim_is_batch:
            raise NotImplementedError(f"{type(self).__name__} does not support last_dim_is_batch.")
        x1_, x2_ = x1 / self.lengthscale, x2 / self.lengthscale
        delta = (x1_ - x2_) if diag else (x1_.unsqueeze(-2) - x2_.unsqueeze(-3))
        per_dim = self.spectrum.profile(delta.abs())
        first = per_dim.sum(-1)
        if self.order == 1:
            return first
        second = (first.square() - per_dim.square().sum(-1)) / 2
        tau = self.interaction_variance if diag else self.interaction_variance.unsqueeze(-1)
        return first + tau * second
