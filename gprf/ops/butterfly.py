r"""Random butterfly orthogonal matrices (Genz 1998), applied in :math:`O(d\log d)`.

A butterfly matrix of order :math:`d = 2^k` is a product of :math:`k` layers of :math:`2\times 2` Givens rotations.
The layer of half-width :math:`h` (:math:`h = 1, 2, \dots, d/2`) splits the coordinates into blocks of :math:`2h`
and rotates every pair :math:`(i, i + h)` of a block by the block's angle; the :math:`d - 1` angles are those of the
hierarchical spherical coordinates of a uniformly random unit vector :math:`z`, so that :math:`B e_1 = z` is uniform
on the sphere (and so is every column). The random orthogonal matrix used here (e.g. for the butterfly rotations of
the SR(3,3) quadrature features) is :math:`M = \prod_{r=1}^{R} B_r P_r` with independent butterflies :math:`B_r` and
uniformly random permutations :math:`P_r` (``R = 3`` by default). ``M`` is exactly orthogonal but only approximately
Haar distributed. Storage is :math:`O(Rd)`; applying ``M`` or :math:`M^\top` to a vector costs :math:`O(Rd\log d)`.
Non-powers of two: zero-pad the vectors with :func:`gprf.ops.pad_to_power_of_two` (padding preserves inner
products).

Reference: A. Genz. *Methods for Generating Random Orthogonal Matrices.* In Monte Carlo and Quasi-Monte Carlo
Methods 1998, Springer, 2000.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _check_power_of_two(dim: int) -> None:
    if dim < 1 or dim & (dim - 1):
        raise ValueError(
            f"Butterfly matrices need a power-of-two dimension, got {dim}; pad with gprf.ops.pad_to_power_of_two."
        )


def butterfly_angles(z: Tensor) -> Tensor:
    r"""Angles ``(..., d - 1)`` of the butterfly :math:`B` with :math:`B e_1 = z / \lVert z\rVert`.

    Layer ``h = 1`` first (``d/2`` angles), then ``h = 2`` (``d/4``), ..., ``h = d/2`` (one angle). For
    ``h = 1`` the block angle is ``atan2(z[2b+1], z[2b])``; for larger ``h`` it is
    ``atan2(|second half of the block|, |first half|)``.
    """
    dim = z.size(-1)
    _check_power_of_two(dim)
    angles = []
    if dim == 1:
        return z.new_zeros(*z.shape[:-1], 0)
    pairs = z.unflatten(-1, (dim // 2, 2))
    angles.append(torch.atan2(pairs[..., 1], pairs[..., 0]))
    sq = (pairs**2).sum(-1)  # squared norms of the current blocks (size 2)
    while sq.size(-1) > 1:
        halves = sq.unflatten(-1, (sq.size(-1) // 2, 2))
        angles.append(torch.atan2(halves[..., 1].sqrt(), halves[..., 0].sqrt()))
        sq = halves.sum(-1)
    return torch.cat(angles, dim=-1)


def random_butterfly(
    batch_shape: torch.Size | tuple[int, ...],
    dim: int,
    *,
    rounds: int = 3,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
) -> tuple[Tensor, Tensor]:
    r"""Draw ``rounds`` butterfly factors and permutations of a random orthogonal :math:`M = \prod_r B_r P_r`.

    Returns:
        ``angles`` of shape ``(*batch_shape, rounds, dim - 1)`` (from uniformly random unit vectors) and
        ``permutations`` of shape ``(*batch_shape, rounds, dim)`` (``int64``).
    """
    _check_power_of_two(dim)
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}.")
    z = torch.randn(*batch_shape, rounds, dim, generator=generator, dtype=torch.float64)
    angles = butterfly_angles(z).to(dtype)
    keys = torch.rand(*batch_shape, rounds, dim, generator=generator, dtype=torch.float64)
    return angles, torch.argsort(keys, dim=-1)


def _gather_last(x: Tensor, index: Tensor) -> Tensor:
    shape = torch.broadcast_shapes(x.shape[:-1], index.shape[:-1])
    return torch.gather(x.expand(*shape, x.size(-1)), -1, index.expand(*shape, index.size(-1)))


def _butterfly_layers(x: Tensor, angles: Tensor, transpose: bool) -> Tensor:
    dim = x.size(-1)
    cos, sin = torch.cos(angles), torch.sin(angles)
    if transpose:
        sin = -sin
    # Offsets of the angle groups: layer h uses angles[offset: offset + d / (2h)].
    layers, offset, h = [], 0, 1
    while h < dim:
        count = dim // (2 * h)
        layers.append((h, offset, count))
        offset += count
        h *= 2
    # B = L_1 L_2 ... L_{d/2}: apply the widest layer first (reverse for the transpose).
    order = layers if transpose else layers[::-1]
    for h, offset, count in order:
        c = cos[..., offset : offset + count].unsqueeze(-1)
        s = sin[..., offset : offset + count].unsqueeze(-1)
        blocks = x.unflatten(-1, (count, 2, h))
        a, b = blocks[..., 0, :], blocks[..., 1, :]
        x = torch.stack((c * a - s * b, s * a + c * b), dim=-2).flatten(-3)
    return x


def butterfly_apply(x: Tensor, angles: Tensor, permutations: Tensor, transpose: bool = False) -> Tensor:
    r""":math:`Mx` (or :math:`M^\top x`) for :math:`M = \prod_r B_r P_r`, in :math:`O(Rd\log d)`.

    Args:
        x: ``(..., d)`` with ``d`` a power of two; leading dimensions broadcast with those of the factors.
        angles: ``(..., rounds, d - 1)`` from :func:`random_butterfly`.
        permutations: ``(..., rounds, d)``; :math:`(P x)_i = x_{\pi(i)}`.
        transpose: Apply :math:`M^\top = \prod_r P_r^\top B_r^\top` (reverse order) instead.
    """
    dim = x.size(-1)
    _check_power_of_two(dim)
    if angles.size(-1) != dim - 1 or permutations.size(-1) != dim:
        raise ValueError(f"Butterfly factors for dimension {angles.size(-1) + 1} cannot act on vectors of size {dim}.")
    rounds = angles.size(-2)
    sequence = range(rounds) if transpose else reversed(range(rounds))
    for r in sequence:
        angle, perm = angles[..., r, :], permutations[..., r, :]
        if transpose:
            x = _butterfly_layers(x, angle, transpose=True)
            x = _gather_last(x, torch.argsort(perm, dim=-1))
        else:
            x = _gather_last(x, perm)
            x = _butterfly_layers(x, angle, transpose=False)
    return x


def butterfly_matrix(angles: Tensor, permutations: Tensor) -> Tensor:
    """The dense matrix :math:`M` (``(..., d, d)``) of the factors, for tests and inspection (``O(d^2 \\log d)``)."""
    dim = permutations.size(-1)
    eye = torch.eye(dim, dtype=angles.dtype, device=angles.device)
    # Columns M e_k: apply to the rows of the identity and transpose.
    columns = butterfly_apply(eye, angles.unsqueeze(-3), permutations.unsqueeze(-3))
    return columns.mT
