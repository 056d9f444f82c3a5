r"""Stationary positive-definite kernels through their spectral measures (Bochner).

A stationary kernel with unit lengthscale is :math:`k(\Delta) = E_{w\sim p}[\cos(w^\top \Delta)]`.
Each kernel here has a closed-form profile :math:`k(r)`, :math:`r = \lVert\Delta\rVert`, and a
spectral law written as :math:`w = s\,z` with :math:`z \sim N(0, I_d)` and an independent radial
scale :math:`s` (RBF: :math:`s = 1`; Matérn-:math:`\nu`: :math:`s = \sqrt{2\nu/g}`, :math:`g\sim\chi^2_{2\nu}`,
a multivariate Student-t with :math:`2\nu` degrees of freedom). The profiles use GPyTorch's
parametrisation of :class:`~gpytorch.kernels.RBFKernel` and :class:`~gpytorch.kernels.MaternKernel`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from scipy import stats
from torch import Tensor


@dataclass(frozen=True)
class StationarySpectrum:
    """A stationary kernel profile and its spectral law ``w = radial_scale * z``, ``z ~ N(0, I)``."""

    name: str
    nu: float | None  # Matérn smoothness; None for RBF

    def profile(self, r: Tensor) -> Tensor:
        """:math:`k(r)` for distances ``r >= 0`` (unit lengthscale)."""
        if self.nu is None:
            return torch.exp(-0.5 * r.square())
        scaled = math.sqrt(2.0 * self.nu) * r
        if self.nu == 0.5:
            poly = torch.ones_like(r)
        elif self.nu == 1.5:
            poly = 1.0 + scaled
        else:  # nu == 2.5
            poly = 1.0 + scaled + scaled.square() / 3.0
        return poly * torch.exp(-scaled)

    def radial_scale(self, shape: torch.Size | tuple[int, ...], generator: torch.Generator) -> Tensor:
        """Independent draws of :math:`s` (float64, CPU); :math:`\\chi^2_{2\\nu}` as a sum of 2ν squared normals."""
        if self.nu is None:
            return torch.ones(shape, dtype=torch.float64)
        dof = int(round(2 * self.nu))
        chi2 = torch.randn(*shape, dof, generator=generator, dtype=torch.float64).square().sum(-1)
        return torch.sqrt(2.0 * self.nu / chi2)

    def radial_scale_from_uniform(self, u: Tensor) -> Tensor:
        """:math:`s` through the inverse CDF of :math:`\\chi^2_{2\\nu}` (for QMC; construction time only)."""
        if self.nu is None:
            return torch.ones_like(u)
        chi2 = stats.chi2.ppf(u.double().cpu().numpy(), df=2.0 * self.nu)
        return torch.sqrt(2.0 * self.nu / torch.as_tensor(chi2, dtype=torch.float64))


SPECTRA: dict[str, StationarySpectrum] = {
    "rbf": StationarySpectrum("rbf", None),
    "matern12": StationarySpectrum("matern12", 0.5),
    "matern32": StationarySpectrum("matern32", 1.5),
    "matern52": StationarySpectrum("matern52", 2.5),
}
