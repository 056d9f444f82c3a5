"""gprf.cli.timing: timed calls."""

from __future__ import annotations

import torch

from gprf.cli.timing import timed


def test_timed_returns_the_value_and_the_elapsed_seconds():
    value, seconds = timed(lambda: 4, torch.device("cpu"))
    assert value == 4 and seconds >= 0.0
