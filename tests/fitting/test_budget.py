"""The refit's cost from timed probes (on a simulated clock, so the measured rates are known), the largest cap whose
refit fits, and the stand-in matrix that times a GPU's eigendecomposition."""

from __future__ import annotations

import math

import pytest
import torch

from gprf.fitting import budget
from gprf.fitting.budget import FitClock, RefitCost
from tests.fitting.conftest import (
    CUBIC_RATE,
    GRAM_RATE,
    NUM_FEATURES,
    NUM_ROWS,
    TUNE_FEATURES,
    largest_prefix_that_fits,
    probe,
    refit_seconds,
)


def test_the_probe_measures_the_rates_of_the_refits_own_steps():
    cost, seconds = probe()
    assert cost.gram_rate == pytest.approx(GRAM_RATE, rel=1e-12)
    assert cost.cubic_rate == pytest.approx(CUBIC_RATE, rel=1e-12)
    assert seconds < refit_seconds(NUM_FEATURES) / 16


def test_the_largest_cap_is_searched_over_multiples_of_the_granule():
    cost = RefitCost(gram_rate=GRAM_RATE, cubic_rate=CUBIC_RATE)
    for seconds in (0.0, 5.0, 44.3, 45.9, 100.0, 400.0):
        expected = largest_prefix_that_fits(seconds)
        assert cost.largest_cap(NUM_ROWS, seconds, lambda cap: cap, NUM_FEATURES, TUNE_FEATURES) == expected
    assert math.isclose(cost.seconds(NUM_ROWS, NUM_FEATURES), refit_seconds(NUM_FEATURES))


def test_below_f_rows_the_refit_costs_the_points_route():
    """N < F: the refit forms and decomposes the N x N Gram (N^2 F and N^3), the features route's costs transposed."""
    cost = RefitCost(gram_rate=GRAM_RATE, cubic_rate=CUBIC_RATE)
    assert math.isclose(cost.seconds(100, 4096), GRAM_RATE * 100**2 * 4096 + CUBIC_RATE * 100**3)
    assert math.isclose(cost.seconds(4096, 100), GRAM_RATE * 4096 * 100**2 + CUBIC_RATE * 100**3)


def test_the_stand_in_for_timing_a_gpus_cubic_steps_is_positive_definite():
    sums = budget._spd_sums(64, torch.zeros((), dtype=torch.float64))
    assert sums.gram.shape == (64, 64) and sums.projections.shape == (64, 2)
    assert torch.linalg.eigvalsh(sums.gram).min().item() >= 1.0 - 1e-12


def test_the_slower_of_two_measurements_counts_rate_by_rate():
    first, second = RefitCost(gram_rate=1.0, cubic_rate=4.0), RefitCost(gram_rate=2.0, cubic_rate=3.0)
    assert first.slower(second) == RefitCost(gram_rate=2.0, cubic_rate=4.0) == second.slower(first)


def test_the_clock_reads_its_timer_and_stops_while_the_callback_runs():
    """A sharded fit's clock is its placement's timer (one reading for every process)."""
    readings = iter([10.0, 11.5, 12.0, 15.0, 15.5, 16.0])
    seen = []
    clock = FitClock(4.0, lambda stage, seconds: seen.append((stage, seconds)), timer=lambda: next(readings))
    assert clock.start == 10.0 and clock.elapsed == 1.5
    clock.checkpoint("tune")  # begins at 12.0, the callback sees 15.0 - 10.0, ends at 15.5
    assert seen == [("tune", 5.0)] and clock.paused == 3.5
    assert clock.left() == 4.0 - (16.0 - 10.0 - 3.5)
