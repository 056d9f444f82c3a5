r"""Sums over ranks of what a sharded step needs from the rows, checked before they are used.

A random-feature GP sees its rows only through sums (:mod:`gprf.streaming.statistics`): the :math:`F\times F` Gram
matrix :math:`G = \sum_r \Phi_r^\top\Sigma_r^{-1}\Phi_r`, projections :math:`b = \sum_r \Phi_r^\top\Sigma_r^{-1}
(y_r - \mu_r)` and scalars. With the rows split over ranks, each rank forms its share and one all-reduce (after the
header of :class:`~gprf.distributed.exchange.ShardExchange`, which checks the layout and gathers the row counts, so
:math:`N = \sum_r N_r` needs no further communication) adds them up. That all-reduce carries, in the sums' dtype (the
factor dtype, float64 by default):

* each symmetric matrix as its lower triangle: :math:`F(F+1)/2` numbers for the Gram matrix;
* every rank's *fingerprint* of its model (:func:`gprf.streaming.features.model_fingerprint`: the feature root, the
  likelihood's noise and the prior mean at a fixed probe input, :math:`F + 2` numbers) in a slot of its own, zeros in
  the other ranks' slots, so that the sum gathers them: every rank compares each rank's fingerprint with rank 0's,
  each part relative to its own magnitude (:func:`~gprf.streaming.statistics.fingerprint_mismatch`), and raises
  :class:`~gprf.exceptions.ShardMismatchError` on every rank before a sum of different models is used;
* values every rank must take from rank 0 (random draws), in rank 0's slot.

Per step that is :math:`F(F+1)/2 + F + 2` numbers of sums for one output (Gram, projection, :math:`q`,
:math:`\sum\log\sigma^2`), plus :math:`K(F + 2)` for the fingerprints of :math:`K` ranks.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from gprf.distributed.exchange import ShardExchange, device_code, dtype_code
from gprf.exceptions import ShardMismatchError
from gprf.streaming.statistics import FINGERPRINT_RTOL, fingerprint_mismatch


@dataclass(frozen=True)
class ShardParts:
    """What one rank contributes to a sum over ranks.

    Attributes:
        sums: The tensors to sum, all of one dtype and device.
        symmetric: For each of ``sums``, whether it is a batch of symmetric matrices (sent as lower triangles).
        rows: The rank's number of rows.
        fingerprint: The rank's model fingerprint ``(*batch, F + 2)``, or ``None`` for none to compare.
        root_dim: :math:`F`, the width of the fingerprint's feature part.
        transforms: The state of the model's input and outcome transforms
            (:func:`~gprf.distributed.identity.transform_state`), compared like the fingerprint.
        shared: Values every rank takes from rank 0 (each rank passes tensors of the same shapes).
        agreed: Further ``(name, value)`` pairs every rank must have alike (e.g. the number of features).
    """

    sums: Sequence[Tensor]
    symmetric: Sequence[bool]
    rows: int
    fingerprint: Tensor | None = None
    root_dim: int = 0
    transforms: Tensor | None = None
    shared: Sequence[Tensor] = ()
    agreed: Sequence[tuple[str, float]] = ()


@dataclass(frozen=True)
class ShardTotals:
    """The sums over all ranks (shaped as each rank's parts), rank 0's shared values and every rank's row count."""

    sums: list[Tensor]
    shared: list[Tensor]
    rows: list[int]

    @property
    def num_rows(self) -> int:
        """:math:`N = \\sum_r N_r`."""
        return sum(self.rows)


@functools.lru_cache(maxsize=8)
def _lower_triangle(size: int, device: torch.device) -> tuple[Tensor, Tensor]:
    rows, cols = torch.tril_indices(size, size, device=device)
    return rows, cols


def _packed(part: Tensor, symmetric: bool) -> Tensor:
    if not symmetric:
        return part.reshape(-1)
    rows, cols = _lower_triangle(part.size(-1), part.device)
    return part[..., rows, cols].reshape(-1)


def _unpacked(values: Tensor, like: Tensor, symmetric: bool) -> Tensor:
    if not symmetric:
        return values.view_as(like)
    rows, cols = _lower_triangle(like.size(-1), like.device)
    full = values.new_empty(like.shape)
    triangle = values.view(*like.shape[:-2], -1)
    full[..., rows, cols] = triangle
    full[..., cols, rows] = triangle
    return full


def _packed_size(part: Tensor, symmetric: bool) -> int:
    if not symmetric:
        return part.numel()
    size = part.size(-1)
    return part.shape[:-2].numel() * size * (size + 1) // 2


def _identity(parts: ShardParts) -> Tensor | None:
    """The rank's fingerprint and transform state in one float64 vector (``None`` for nothing to compare)."""
    pieces = [value.reshape(-1).double() for value in (parts.fingerprint, parts.transforms) if value is not None]
    return torch.cat(pieces) if pieces else None


def _layout(parts: ShardParts) -> list[tuple[str, float]]:
    first = parts.sums[0]
    sizes = [_packed_size(part, symmetric) for part, symmetric in zip(parts.sums, parts.symmetric, strict=True)]
    return [
        ("the number of summed values", sum(sizes)),
        ("the fingerprint's size", 0 if parts.fingerprint is None else parts.fingerprint.numel()),
        ("the size of the input and outcome transforms", 0 if parts.transforms is None else parts.transforms.numel()),
        ("the number of values shared from rank 0", sum(part.numel() for part in parts.shared)),
        ("the sums' dtype", dtype_code(first.dtype)),
        ("the model's device type", device_code(first.device)),
        *parts.agreed,
    ]


def _transforms_differ(first: Tensor, second: Tensor) -> bool:
    scale = torch.maximum(first.abs(), second.abs()).amax() if first.numel() else first.new_zeros(())
    return bool(((first - second).abs() > FINGERPRINT_RTOL * scale).any())


def _check_identities(identities: Tensor, parts: ShardParts, step: str) -> None:
    """Raise on every rank when a rank's fingerprint or transforms differ from rank 0's (``identities``: the
    :func:`_identity` of every rank)."""
    split = [0 if parts.fingerprint is None else parts.fingerprint.numel()]
    split.append(identities.size(-1) - split[0])
    differences = []
    for rank in range(1, identities.size(0)):
        (first, first_transforms), (other, other_transforms) = (row.split(split) for row in identities[[0, rank]])
        differing = []
        if parts.fingerprint is not None:
            shape = parts.fingerprint.shape
            differing.append(fingerprint_mismatch(first.view(shape), other.view(shape), parts.root_dim))
        if _transforms_differ(first_transforms, other_transforms):
            differing.append("input or outcome transforms")
        differing = [what for what in differing if what is not None]
        if differing:
            differences.append(f"rank {rank} has other {' and '.join(differing)} than rank 0")
    if differences:
        raise ShardMismatchError(
            f"The ranks use different models in the step '{step}': {'; '.join(differences)}. Build the model with the "
            "same seed and hyperparameters on every rank, or load rank 0's state_dict everywhere "
            "(gprf.distributed.broadcast_state)."
        )


def sum_over_ranks(
    exchange: ShardExchange, step: str, parts: ShardParts | None, failure: BaseException | None = None
) -> ShardTotals:
    """The sums of every rank's ``parts`` (module docstring); call it on every rank.

    ``failure``: the exception this rank's parts could not be formed for (``parts`` is then ``None``): every rank
    raises it (:meth:`~gprf.distributed.exchange.ShardExchange.agree`). Raises
    :class:`~gprf.exceptions.ShardMismatchError` on every rank when the ranks' layouts or fingerprints differ.
    """
    layout = [] if parts is None else _layout(parts)
    counts = exchange.agree(step, layout, own=() if parts is None else (parts.rows,), failure=failure)
    rows = [int(count) for count in counts[:, 0].tolist()]

    first = parts.sums[0]
    dtype, device = first.dtype, first.device
    world_size = exchange.world_size
    pieces = [
        _packed(part.detach(), symmetric).to(dtype) for part, symmetric in zip(parts.sums, parts.symmetric, strict=True)
    ]
    identity = _identity(parts)
    if identity is not None:
        slots = identity.new_zeros(world_size, identity.numel())
        slots[exchange.rank] = identity
        pieces.append(slots.reshape(-1).to(device=device, dtype=dtype))
    for value in parts.shared:
        pieces.append((value if exchange.rank == 0 else torch.zeros_like(value)).reshape(-1).to(device, dtype))
    total = exchange.all_reduce(step, torch.cat(pieces))

    sizes = [piece.numel() for piece in pieces]
    chunks = list(total.split(sizes))
    summed = [
        _unpacked(chunk, part, symmetric)
        for chunk, part, symmetric in zip(chunks, parts.sums, parts.symmetric, strict=False)
    ]
    chunks = chunks[len(parts.sums) :]
    if identity is not None:
        _check_identities(chunks.pop(0).view(world_size, -1).double(), parts, step)
    shared = [chunk.view_as(value).to(value.dtype) for chunk, value in zip(chunks, parts.shared, strict=True)]
    return ShardTotals(summed, shared, rows)
