"""Timings of the benchmarks: contenders called round-robin (:func:`gprf.cli.timing.timed` for each call)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from gprf.cli.timing import timed


def interleaved_timings(
    fns: dict[str, Callable[[], object]], device: torch.device, repeats: int, warmup: int
) -> dict[str, list[float]]:
    """Seconds of ``repeats`` calls of each function, after ``warmup`` untimed calls of each.

    The timed calls go round-robin over the functions, so that a change of machine load during the
    run affects every contender alike (ratios measured in the same run stay meaningful).
    """
    for fn in fns.values():
        for _ in range(warmup):
            timed(fn, device)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            times[name].append(timed(fn, device)[1])
    return times
