"""Quasi-Monte-Carlo draws."""

from __future__ import annotations

import torch
from torch import Tensor


def sobol_uniform(
    num_points: int,
    dim: int,
    *,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
    skip: int = 0,
) -> Tensor:
    """Scrambled Sobol points in the open cube :math:`(0, 1)^{dim}`, shape ``(num_points, dim)``.

    ``skip`` starts at point ``skip`` of the sequence: with the same ``generator`` state, the points of
    ``skip=a`` are rows ``a..`` of a draw from 0 (bit for bit), so a sequence can be continued.

    The scrambling seed is drawn from ``generator`` so the points are reproducible. Scrambling
    (random linear matrix scramble plus digital shift) makes every point marginally uniform, so
    estimators built on these points stay unbiased. Points are kept one ulp of ``dtype`` away from 0
    and 1 so that inverse CDFs stay finite.
    """
    if num_points < 1 or dim < 1:
        raise ValueError(f"sobol_uniform needs num_points >= 1 and dim >= 1, got {num_points} and {dim}.")
    if skip < 0:
        raise ValueError(f"sobol_uniform needs skip >= 0, got {skip}.")
    if dim > torch.quasirandom.SobolEngine.MAXDIM:
        raise ValueError(f"Sobol sequences support dim <= {torch.quasirandom.SobolEngine.MAXDIM}, got {dim}.")
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator).item())
    # SobolEngine computes its first point in torch's default dtype: pin it so draws never depend on it.
    previous_default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        engine = torch.quasirandom.SobolEngine(dimension=dim, scramble=True, seed=seed)
        if skip:
            engine.fast_forward(skip)
        points = engine.draw(num_points, dtype=torch.float64)
    finally:
        torch.set_default_dtype(previous_default)
    margin = torch.finfo(dtype).eps
    return points.to(dtype=dtype, device=device).clamp(margin, 1.0 - margin)


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
