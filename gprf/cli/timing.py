"""Wall-clock timing that waits for asynchronous devices (CUDA) before reading the clock."""

from __future__ import annotations

import statistics
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


def repeat_timed(fn: Callable[[], object], device: torch.device, repeats: int, warmup: int) -> list[float]:
    """Seconds of ``repeats`` calls of ``fn`` after ``warmup`` untimed calls."""
    for _ in range(warmup):
        timed(fn, device)
    return [timed(fn, device)[1] for _ in range(repeats)]


def median(values: list[float]) -> float:
    return statistics.median(values)
