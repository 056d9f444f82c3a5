"""Wall-clock timing that waits for asynchronous devices (CUDA) before reading the clock."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import torch

T = TypeVar("T")


def synchronize(device: torch.device) -> None:
    """Wait for all queued work on ``device`` (no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn: Callable[[], T], device: torch.device) -> tuple[T, float]:
    """``(fn(), seconds)``, synchronising ``device`` before starting and before stopping the clock."""
    synchronize(device)
    start = time.perf_counter()
    result = fn()
    synchronize(device)
    return result, time.perf_counter() - start


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
