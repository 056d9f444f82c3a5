"""Helpers shared by the tests of the signed feature maps and their spectra."""

from __future__ import annotations

import torch

from gprf.features import delta_gaussian_spectrum

Z = 5.0  # z-score bound of the Monte-Carlo checks: a correct implementation fails one with probability < 6e-7
DELTA = delta_gaussian_spectrum([1.5, -1.0], [1.0, 0.4])


def sphere_pairs(dim: int, angles: tuple[float, ...], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit vectors x_i, y_i at the given angles (distances 2 sin(angle / 2))."""
    generator = torch.Generator().manual_seed(seed)
    basis, _ = torch.linalg.qr(torch.randn(dim, dim, generator=generator, dtype=torch.float64))
    angles = torch.tensor(angles, dtype=torch.float64)
    x = basis[:, 0].expand(len(angles), dim)
    y = torch.cos(angles).unsqueeze(-1) * basis[:, 0] + torch.sin(angles).unsqueeze(-1) * basis[:, 1]
    return x, y


X_DELTA, Y_DELTA = sphere_pairs(4, (0.3, 0.8, 1.4, 2.2, 3.0), seed=0)
