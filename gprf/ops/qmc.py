"""Quasi-Monte-Carlo draws."""

from __future__ import annotations

import torch
from torch import Tensor

# Keep Sobol points away from {0, 1} so that inverse CDFs stay finite.
_UNIT_INTERVAL_MARGIN = 1e-10


def sobol_uniform(
    num_points: int,
    dim: int,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> Tensor:
    """Scrambled Sobol points in :math:`(0, 1)^{dim}`, shape ``(num_points, dim)``.

    The scrambling seed is drawn from ``generator`` so the points are reproducible. Scrambling
    (random linear matrix scramble plus digital shift) makes every point marginally uniform, so
    estimators built on these points stay unbiased.
    """
    if dim > torch.quasirandom.SobolEngine.MAXDIM:
        raise ValueError(f"Sobol sequences support dim <= {torch.quasirandom.SobolEngine.MAXDIM}, got {dim}.")
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator).item())
    engine = torch.quasirandom.SobolEngine(dimension=dim, scramble=True, seed=seed)
    points = engine.draw(num_points, dtype=torch.float64)
    points = points.clamp(_UNIT_INTERVAL_MARGIN, 1.0 - _UNIT_INTERVAL_MARGIN)
    return points.to(dtype=dtype, device=device)


def sobol_normal(
    num_points: int,
    dim: int,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> Tensor:
    """Standard-normal QMC draws: scrambled Sobol points through the inverse normal CDF."""
    uniform = sobol_uniform(num_points, dim, generator=generator, dtype=torch.float64)
    return torch.special.ndtri(uniform).to(dtype=dtype, device=device)
