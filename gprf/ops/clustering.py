r"""Farthest-point clustering and nearest-centre assignment (Wacker & Filippone 2022, Alg. 1), pure torch.

Farthest-point clustering covers a point set with balls of radius below a threshold :math:`\theta`: start with
the mean of the points as the first centre, then repeatedly add the point farthest from its nearest centre,

.. math::
    \delta_i = \min_{c\in C}\lVert x_i - c\rVert, \qquad C \leftarrow C \cup \{x_{\arg\max_i\delta_i}\},

until the max–min distance :math:`\max_i\delta_i` drops below :math:`\theta` (or a cap on the number of
centres is reached). Each step costs :math:`O(Nd)` (distances to the newest centre only), so
:math:`N_C` centres cost :math:`O(N N_C d)` time and :math:`O(N)` extra memory. Centres are data points (apart
from the mean), so the result needs no convergence check, unlike k-means.

Reference: J. Wacker, M. Filippone. *Local Random Feature Approximations of the Gaussian Kernel.* Procedia
Computer Science (KES), 2022 (arXiv:2204.05667).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from gprf._checks import check_positive_int


@dataclass(frozen=True)
class Clustering:
    """Result of :func:`farthest_point_clustering`."""

    centers: Tensor  # (*batch, K, d): the mean first, then the added points in the order they were chosen
    assignment: Tensor  # (*batch, N) long: index of each point's nearest centre (first one on ties)
    radius: Tensor  # (*batch,): max-min distance max_i min_c ||x_i - c|| of the final centres

    @property
    def num_centers(self) -> int:
        return self.centers.size(-2)


def _check_points(x: Tensor, name: str) -> None:
    if not torch.is_tensor(x) or not x.is_floating_point() or x.is_complex():
        raise TypeError(f"{name} must be a real floating-point tensor of shape (..., n, d).")
    if x.dim() < 2 or x.size(-2) == 0:
        raise ValueError(f"{name} must have shape (..., n, d) with n >= 1, got {tuple(x.shape)}.")


def farthest_point_clustering(x: Tensor, threshold: float, max_centers: int | None = None) -> Clustering:
    r"""Farthest-point clustering of ``x`` (``(..., N, d)``) started at its mean (see the module docstring).

    Args:
        x: Points; leading dimensions are independent batches. Batches share the number of centres: the loop
            runs until *every* batch member is covered below ``threshold``; members covered earlier keep
            adding points, which only makes their covering finer.
        threshold: :math:`\theta > 0`, the target max–min distance (in the units of ``x``).
        max_centers: Cap on the number of centres (mean included); ``None``: at most ``N + 1``.

    Returns:
        :class:`Clustering` with the centres, the nearest-centre assignment of every point and the final
        covering radius :math:`\max_i\delta_i` (below ``threshold`` unless the cap was reached).

    The stopping test reads one boolean per added centre from the device (a set-up step, not a forward pass).
    """
    _check_points(x, "x")
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float))
        or not math.isfinite(threshold)
        or threshold <= 0
    ):
        raise ValueError(f"threshold must be a finite number > 0, got {threshold!r}.")
    num_points = x.size(-2)
    cap = num_points + 1 if max_centers is None else check_positive_int(max_centers, "max_centers")
    x = x.detach()
    centers = [x.mean(-2)]
    min_dist = (x - centers[0].unsqueeze(-2)).norm(dim=-1)
    assignment = torch.zeros(min_dist.shape, dtype=torch.long, device=x.device)
    while len(centers) < cap:
        radius, farthest = min_dist.max(-1)
        if not bool((radius >= threshold).any()):
            break
        new = x.gather(-2, farthest[..., None, None].expand(*farthest.shape, 1, x.size(-1))).squeeze(-2)
        dist = (x - new.unsqueeze(-2)).norm(dim=-1)
        closer = dist < min_dist  # strict: ties stay with the earlier centre
        assignment = torch.where(closer, len(centers), assignment)
        min_dist = torch.minimum(min_dist, dist)
        centers.append(new)
    return Clustering(torch.stack(centers, dim=-2), assignment, min_dist.max(-1).values)


def nearest_center(x: Tensor, centers: Tensor) -> tuple[Tensor, Tensor]:
    """Index ``(..., M)`` of the nearest of ``centers`` (``(..., K, d)``) for every row of ``x`` (``(..., M, d)``),
    and the distance to it. :math:`O(MKd)`; distances are computed directly (not through the
    :math:`\\lVert x\\rVert^2 + \\lVert c\\rVert^2 - 2x^\\top c` expansion, which loses exact zeros)."""
    _check_points(x, "x")
    _check_points(centers, "centers")
    if x.size(-1) != centers.size(-1):
        raise ValueError(f"x has {x.size(-1)} columns but centers have {centers.size(-1)}.")
    dist = torch.cdist(x, centers, compute_mode="donot_use_mm_for_euclid_dist")
    distance, index = dist.min(-1)
    return index, distance
