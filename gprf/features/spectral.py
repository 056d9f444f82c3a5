r"""Stationary positive-definite kernels through their spectral measures (Bochner).

A stationary kernel with unit lengthscale is :math:`k(\Delta) = E_{w\sim p}[\cos(w^\top \Delta)]`.
Each kernel here has a closed-form profile :math:`k(r)`, :math:`r = \lVert\Delta\rVert`, and a
spectral law written as :math:`w = s\,z` with :math:`z \sim N(0, I_d)` and an independent radial
scale :math:`s` (RBF: :math:`s = 1`; Matérn-:math:`\nu`: :math:`s = \sqrt{2\nu/g}`, :math:`g\sim\chi^2_{2\nu}`,
a multivariate Student-t with :math:`2\nu` degrees of freedom). The profiles use GPyTorch's
parametrisation of :class:`~gpytorch.kernels.RBFKernel` and :class:`~gpytorch.kernels.MaternKernel`.

A new stationary family subclasses :class:`StationarySpectrum` (its profile and its radial-scale sampler); random
Fourier features take the spectrum itself as their ``kernel`` (:class:`~gprf.features.RandomFourierFeatures`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import torch
from scipy import stats
from torch import Tensor

from gprf._checks import check_choice


class StationarySpectrum(ABC):
    r"""A stationary kernel of unit lengthscale, :math:`k(\Delta) = k(\lVert\Delta\rVert)`, and its spectral law
    :math:`w = s\,z`, :math:`z\sim N(0, I_d)`, with an independent radial scale :math:`s \ge 0` (a scale mixture of
    Gaussians: :math:`k(r) = E_s[e^{-s^2r^2/2}]`).

    Subclasses set :attr:`name` (how maps, exact targets and the CLI call the kernel) and implement :meth:`profile`
    and :meth:`radial_scale`; :meth:`radial_scale_from_uniform` (the inverse CDF of :math:`s`) is needed by the
    ``"qmc"`` sampler only. Every sampler of :class:`~gprf.features.RandomFourierFeatures` then works for the new
    kernel: iid draws :math:`s z`, orthogonal and structured blocks rescale their rows by
    :math:`\chi_d\cdot s`, QMC maps one extra Sobol coordinate through the inverse CDF of :math:`s`.
    """

    #: The kernel's name (unique among the exact targets, :mod:`gprf.kernels.exact.targets`).
    name: str
    #: Whether :math:`s` is random (QMC spends one Sobol coordinate on it); the Gaussian's :math:`s = 1` is not.
    random_radial_scale: ClassVar[bool] = True

    @abstractmethod
    def profile(self, r: Tensor) -> Tensor:
        """:math:`k(r)` for distances ``r >= 0`` (unit lengthscale)."""

    @abstractmethod
    def radial_scale(self, shape: torch.Size | tuple[int, ...], generator: torch.Generator) -> Tensor:
        """Independent draws of :math:`s` (float64, CPU) from ``generator``."""

    def radial_scale_from_uniform(self, u: Tensor) -> Tensor:
        """:math:`s` at the quantiles ``u`` of its law (float64; construction time only): what QMC draws."""
        raise NotImplementedError(
            f"The {self.name!r} spectrum has no inverse CDF of its radial scale, which sampler='qmc' needs; use "
            "sampler='iid', 'orthogonal' or 'structured'."
        )


@dataclass(frozen=True)
class GaussianSpectrum(StationarySpectrum):
    r"""GPyTorch's RBF kernel :math:`k(r) = e^{-r^2/2}`: :math:`w \sim N(0, I_d)`, :math:`s = 1`."""

    name: str = "rbf"
    random_radial_scale: ClassVar[bool] = False

    def profile(self, r: Tensor) -> Tensor:
        return torch.exp(-0.5 * r.square())

    def radial_scale(self, shape: torch.Size | tuple[int, ...], generator: torch.Generator) -> Tensor:
        return torch.ones(shape, dtype=torch.float64)

    def radial_scale_from_uniform(self, u: Tensor) -> Tensor:
        return torch.ones_like(u)


#: The smoothness values of GPyTorch's ``MaternKernel``.
MATERN_NUS = (0.5, 1.5, 2.5)


@dataclass(frozen=True)
class MaternSpectrum(StationarySpectrum):
    r"""GPyTorch's Matérn-:math:`\nu` kernel (:math:`\nu \in \{1/2, 3/2, 5/2\}`, named ``"matern12"``,
    ``"matern32"``, ``"matern52"``): :math:`s = \sqrt{2\nu/g}`, :math:`g\sim\chi^2_{2\nu}`."""

    nu: float

    def __post_init__(self) -> None:
        if self.nu not in MATERN_NUS:
            raise ValueError(f"nu must be one of {', '.join(map(str, MATERN_NUS))} (GPyTorch's Matérn), got {self.nu}.")

    @property
    def name(self) -> str:
        return f"matern{round(2 * self.nu)}2"

    def profile(self, r: Tensor) -> Tensor:
        scaled = math.sqrt(2.0 * self.nu) * r
        if self.nu == 0.5:
            poly = torch.ones_like(r)
        elif self.nu == 1.5:
            poly = 1.0 + scaled
        else:  # nu == 2.5
            poly = 1.0 + scaled + scaled.square() / 3.0
        return poly * torch.exp(-scaled)

    def radial_scale(self, shape: torch.Size | tuple[int, ...], generator: torch.Generator) -> Tensor:
        """:math:`\\chi^2_{2\\nu}` as a sum of 2ν squared normals."""
        dof = round(2 * self.nu)
        chi2 = torch.randn(*shape, dof, generator=generator, dtype=torch.float64).square().sum(-1)
        return torch.sqrt(2.0 * self.nu / chi2)

    def radial_scale_from_uniform(self, u: Tensor) -> Tensor:
        chi2 = stats.chi2.ppf(u.double().cpu().numpy(), df=2.0 * self.nu)
        return torch.sqrt(2.0 * self.nu / torch.as_tensor(chi2, dtype=torch.float64))


#: The built-in stationary spectra by name: ``"rbf"``, ``"matern12"``, ``"matern32"``, ``"matern52"``.
SPECTRA: dict[str, StationarySpectrum] = {
    spectrum.name: spectrum for spectrum in (GaussianSpectrum(), *(MaternSpectrum(nu) for nu in MATERN_NUS))
}


def stationary_spectrum(kernel: str | StationarySpectrum) -> StationarySpectrum:
    """The spectrum a map is built for: a built-in one by name (:data:`gprf.features.SPECTRA`), or a
    :class:`StationarySpectrum` of a new stationary family."""
    if isinstance(kernel, StationarySpectrum):
        return kernel
    return SPECTRA[check_choice(kernel, "kernel", tuple(SPECTRA))]
