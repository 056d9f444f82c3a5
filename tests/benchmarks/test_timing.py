"""benchmarks.timing: contenders timed round-robin."""

from __future__ import annotations

import torch

from benchmarks.timing import interleaved_timings


def test_interleaved_timings_warms_up_then_times_the_functions_round_robin():
    order = []
    fns = {name: (lambda name=name: order.append(name)) for name in ("a", "b")}
    times = interleaved_timings(fns, torch.device("cpu"), repeats=3, warmup=2)
    assert order == ["a", "a", "b", "b"] + ["a", "b"] * 3  # each warm-up first, then one timed call each per round
    assert {name: len(seconds) for name, seconds in times.items()} == {"a": 3, "b": 3}
    assert all(value >= 0.0 for seconds in times.values() for value in seconds)
