"""gprf.cli.timing: interleaved timings and timed calls."""

from __future__ import annotations

import torch

from gprf.cli.timing import interleaved_timings, timed


def test_interleaved_timings_calls_each_function_warmup_plus_repeats_times():
    calls = {"a": 0, "b": 0}

    def make(name):
        def fn():
            calls[name] += 1

        return fn

    times = interleaved_timings({"a": make("a"), "b": make("b")}, torch.device("cpu"), repeats=3, warmup=2)
    assert calls == {"a": 5, "b": 5}
    assert {k: len(v) for k, v in times.items()} == {"a": 3, "b": 3}
    assert timed(lambda: 4, torch.device("cpu"))[0] == 4


def test_timed_returns_the_value_and_the_elapsed_seconds():
    value, seconds = timed(lambda: 4, torch.device("cpu"))
    assert value == 4 and seconds >= 0.0
