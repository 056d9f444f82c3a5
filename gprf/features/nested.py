r"""Nested feature draws: draw versions unique across maps, and random draws as prefixes of an endless stream.

**Draw versions.** Every new draw of any map (construction, :meth:`~gprf.features.FeatureMapBase.resample`,
``load_state_dict``, :meth:`~gprf.features.FeatureMapBase.resized`) takes a fresh value of one process-wide
monotonic counter (:func:`next_draw_version`), so two different draws never show the same version, even when
one map object is swapped for another inside a kernel. Unpickled maps keep their version and move the counter
past it (:func:`observe_draw_version`).

**Draw streams.** A nestable map does not draw its ``F`` features at once: it reads the first units (frequencies,
orthogonal rows, structured blocks, Sobol points) of an endless stream. The stream of a batch member is a list of
*segments* ``(first unit, seed)``; unit ``u`` of the stream belongs to the last segment starting at or before
``u``, and its random numbers come from the chunk ``u // chunk_size`` of that segment, drawn from a generator
seeded by ``(seed, chunk)`` alone (:func:`stream_generator`). The draws of ``F`` features are therefore the first
units of the draws of any ``F' > F``: shrinking keeps a prefix, growing appends the continuation, and the draws
depend on the stream and ``F`` only. The segments are a buffer (``draw_streams``, shape
``(*batch_shape, segments, 2)``), so they follow ``state_dict``, pickling and batch indexing.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from gprf.ops import haar_orthogonal

_draw_versions = itertools.count()


def next_draw_version() -> int:
    """A fresh draw version, larger than every version handed out (or observed) before in this process."""
    return next(_draw_versions)


def observe_draw_version(version: int) -> None:
    """Move the counter past ``version`` (a map unpickled from another process keeps its version)."""
    global _draw_versions
    current = next(_draw_versions)
    _draw_versions = itertools.count(max(current, int(version) + 1))


def new_streams(batch_shape: torch.Size, first_unit: int, generator: torch.Generator) -> Tensor:
    """One segment per batch member, starting at ``first_unit``, with seeds from ``generator``: ``(*batch, 1, 2)``."""
    seeds = torch.randint(0, 2**62, (*batch_shape, 1), generator=generator)
    return torch.stack([torch.full_like(seeds, first_unit), seeds], dim=-1)


def mixed_seed(seed: int, key: int) -> int:
    """A seed in ``[0, 2**63)`` for the pair ``(seed, key)`` (NumPy's ``SeedSequence`` mixes it, so nearby seeds and
    keys give unrelated seeds)."""
    state = np.random.SeedSequence([int(seed) % 2**64, int(key)]).generate_state(1, dtype=np.uint64)[0]
    return int(state) >> 1


def stream_generator(seed: int, chunk: int) -> torch.Generator:
    """The generator of chunk ``chunk`` of the stream ``seed``."""
    return torch.Generator().manual_seed(mixed_seed(seed, chunk))


def member_segments(draw_streams: Tensor) -> list[list[tuple[int, int]]]:
    """The segments ``[(first unit, seed), ...]`` of every batch member (flattened batch), for the CPU samplers."""
    flat = draw_streams.reshape(-1, *draw_streams.shape[-2:]).tolist()
    return [[(int(start), int(seed)) for start, seed in member] for member in flat]


ChunkSampler = Callable[[torch.Generator, int, "dict[str, Tensor] | None"], "dict[str, Tensor]"]


def chunked_units(
    segments: list[tuple[int, int]],
    num_units: int,
    chunk_size: int,
    sample_chunk: ChunkSampler,
    unit_dims: dict[str, int],
) -> dict[str, Tensor]:
    """The draws of units ``0..num_units - 1`` of one member's stream, concatenated along ``unit_dims``.

    ``sample_chunk(generator, chunk, head)`` returns the ``chunk_size`` units of a chunk. ``head`` is ``None``
    except where a segment starts inside the chunk: it then holds the units of the chunk before the segment
    start (from the earlier segment), and the sampler returns a chunk that continues them (e.g. an orthogonal
    block completed in the orthogonal complement of the head's rows); every other sampler ignores it.
    """
    pieces: dict[str, list[Tensor]] = {name: [] for name in unit_dims}
    for chunk in range(math.ceil(num_units / chunk_size)):
        first, last = chunk * chunk_size, min((chunk + 1) * chunk_size, num_units)
        head: dict[str, Tensor] | None = None
        for index, (start, seed) in enumerate(segments):
            stop = segments[index + 1][0] if index + 1 < len(segments) else math.inf
            low, high = max(start, first), min(stop, last)
            if low >= high:
                continue
            draws = sample_chunk(stream_generator(seed, chunk), chunk, head)
            pieces_here = {name: draws[name].narrow(dim, low - first, high - low) for name, dim in unit_dims.items()}
            for name, piece in pieces_here.items():
                pieces[name].append(piece)
            # The units of the chunk so far: what a segment starting later in the chunk continues.
            head = (
                pieces_here
                if head is None
                else {name: torch.cat([head[name], piece], dim=unit_dims[name]) for name, piece in pieces_here.items()}
            )
    return {name: torch.cat(parts, dim=unit_dims[name]) for name, parts in pieces.items()}


def complete_orthonormal_rows(rows: Tensor, generator: torch.Generator) -> Tensor:
    r"""The ``d - k`` rows that complete ``k`` orthonormal ``rows`` (``(k, d)``, float64) to an orthogonal matrix,
    drawn from the conditional Haar law.

    With :math:`B` an orthonormal basis of the orthogonal complement of the rows and :math:`O` Haar on
    :math:`O(d - k)`, the rows of :math:`O B^\top` are a uniformly random orthonormal frame of the complement,
    whatever the basis: the law of the last :math:`d - k` rows of a Haar matrix given its first :math:`k`.
    """
    k, d = rows.shape
    basis = torch.linalg.qr(rows.mT, mode="complete").Q[:, k:]
    return haar_orthogonal((), d - k, generator=generator) @ basis.mT
