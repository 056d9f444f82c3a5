r"""Vertices of a regular simplex, applied in :math:`O(d)` (Munkhoeva et al. 2018, §2.3).

The nodes of the SR(3,3) spherical-radial quadrature rules of :class:`~gprf.features.QuadratureFeatures`.

Reference: M. Munkhoeva, Y. Kapushev, E. Burnaev, I. Oseledets. *Quadrature-based Features for Kernel
Approximation.* Advances in Neural Information Processing Systems (NeurIPS), 2018.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _simplex_scales(dim: int, dtype: torch.dtype, device) -> Tensor:
    """:math:`r_i = \\sqrt{(d+1)/((d-i)\\,d\\,(d-i+1))}` for ``i = 0..d-1``."""
    i = torch.arange(dim, dtype=torch.float64)
    r = torch.sqrt((dim + 1) / ((dim - i) * dim * (dim - i + 1)))
    return r.to(dtype=dtype, device=device)


def simplex_vertices(
    dim: int, *, dtype: torch.dtype = torch.float64, device: torch.device | str | None = None
) -> Tensor:
    r"""The ``d + 1`` unit vertices of a regular simplex centred at 0, as the columns of ``V`` (``d x (d+1)``).

    For ``i = 0..d-1``: :math:`V_{ii} = (d-i)r_i`, :math:`V_{i,i+1:} = -r_i`, zero below the diagonal, with
    :math:`r_i = \sqrt{(d+1)/((d-i)\,d\,(d-i+1))}`. Every column has unit norm, distinct columns have inner
    product :math:`-1/d` and the columns sum to zero. Dense (``O(d^2)``): for tests and small ``d``;
    :func:`simplex_project` applies :math:`V^\top` in :math:`O(d)`.
    """
    if dim < 1:
        raise ValueError(f"simplex_vertices needs dim >= 1, got {dim}.")
    r = _simplex_scales(dim, torch.float64, None)
    v = torch.zeros(dim, dim + 1, dtype=torch.float64)
    for i in range(dim):
        v[i, i] = (dim - i) * r[i]
        v[i, i + 1 :] = -r[i]
    return v.to(dtype=dtype, device=device)


def simplex_project(u: Tensor) -> Tensor:
    r"""Inner products :math:`v_j^\top u` with the ``d + 1`` simplex vertices, shape ``(..., d + 1)``, in :math:`O(d)`.

    Equals ``u @ simplex_vertices(d)``: with the prefix sums :math:`s_j = \sum_{i<j} r_i u_i`,
    :math:`v_j^\top u = (d-j)\,r_j u_j - s_j` for ``j < d`` and :math:`v_d^\top u = -s_d`.

    Args:
        u: Tensor of shape ``(..., d)``.
    """
    dim = u.size(-1)
    if dim < 1:
        raise ValueError("simplex_project needs a non-empty last dimension.")
    r = _simplex_scales(dim, u.dtype, u.device)
    ru = u * r
    prefix = torch.cumsum(ru, dim=-1)
    exclusive = prefix - ru  # s_j = sum_{i<j} r_i u_i
    diagonal = ru * torch.arange(dim, 0, -1, dtype=u.dtype, device=u.device)  # (d - j) r_j u_j
    return torch.cat([diagonal - exclusive, -prefix[..., -1:]], dim=-1)
