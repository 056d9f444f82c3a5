"""Fast Walsh–Hadamard transform and power-of-two padding."""

from __future__ import annotations

import torch
from torch import Tensor


def next_power_of_two(n: int) -> int:
    """Smallest power of two that is ``>= n`` (``n >= 1``)."""
    if n < 1:
        raise ValueError(f"next_power_of_two needs n >= 1, got {n}.")
    return 1 << (n - 1).bit_length()


def pad_to_power_of_two(x: Tensor, dim: int = -1) -> Tensor:
    """Zero-pad ``x`` along ``dim`` to the next power of two (returns ``x`` itself if already one).

    Zero padding leaves every inner product unchanged, which is why sketches and structured
    orthogonal blocks can pad silently.
    """
    size = x.size(dim)
    target = next_power_of_two(size)
    if target == size:
        return x
    dim = dim % x.dim()
    pad_shape = list(x.shape)
    pad_shape[dim] = target - size
    return torch.cat([x, x.new_zeros(pad_shape)], dim=dim)


def fwht(x: Tensor, dim: int = -1) -> Tensor:
    r"""Unnormalised fast Walsh–Hadamard transform along ``dim``.

    Computes :math:`H x` with :math:`H` the Sylvester Hadamard matrix of order :math:`d = 2^k`
    (natural order, entries :math:`\pm 1`, :math:`H_{ij} = (-1)^{\langle i, j\rangle}` with
    :math:`\langle i, j\rangle` the bitwise inner product), so ``fwht(x) == x @ scipy.linalg.hadamard(d)``
    (``H`` is symmetric). Cost :math:`O(d \log d)` per vector through :math:`\log_2 d` butterfly stages,
    each one reshape and one add/subtract; works for any leading batch shape, under autograd, on any
    device and floating/complex dtype. ``fwht(fwht(x)) == d * x``.

    Args:
        x: Input tensor; ``x.size(dim)`` must be a power of two (use :func:`pad_to_power_of_two`).
        dim: Dimension to transform.
    """
    d = x.size(dim)
    if d & (d - 1) != 0 or d == 0:
        raise ValueError(
            f"fwht needs a power-of-two size along dim {dim}, got {d}; pad with gprf.ops.pad_to_power_of_two first."
        )
    moved = x.movedim(dim, -1)
    batch_shape = moved.shape[:-1]
    out = moved.reshape(-1, d)
    h = 1
    while h < d:
        # Pair entries i and i + h inside blocks of size 2h: (a, b) -> (a + b, a - b).
        blocks = out.view(-1, d // (2 * h), 2, h)
        a, b = blocks[:, :, 0, :], blocks[:, :, 1, :]
        out = torch.stack((a + b, a - b), dim=2).view(-1, d)
        h *= 2
    return out.view(*batch_shape, d).movedim(-1, dim)
