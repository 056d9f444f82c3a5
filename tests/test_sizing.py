"""gprf.sizing: the rule for the number of features, its arguments, and the one warning for oversized refit loops."""

from __future__ import annotations

import warnings

import pytest

import gprf
from gprf.exceptions import OversizedFeaturesWarning
from gprf.sizing import RefitMonitor, is_oversized, suggest_num_features


@pytest.mark.parametrize(
    ("num_points", "num_dims", "expected"),
    [
        (20, 6, 192),  # the floor, 32 d
        (100, 6, 200),  # twice the points
        (150, 6, 300),
        (500, 6, 384),  # the cap, 64 d
        (2000, 6, 384),
        (0, 2, 64),
        (40, 20, 640),
    ],
)
def test_suggested_features(num_points, num_dims, expected):
    assert suggest_num_features(num_points, num_dims) == expected
    assert gprf.suggest_num_features(num_points, num_dims) == expected


def test_the_rule_takes_its_constants_and_rounds_up_to_even():
    assert suggest_num_features(77, 1, points_ratio=1, min_per_dim=1, max_per_dim=1000) == 78
    assert suggest_num_features(10, 2, points_ratio=0.5, min_per_dim=1, max_per_dim=100) == 6  # ceil(5) -> 6
    assert suggest_num_features(1000, 3, min_per_dim=4, max_per_dim=10) == 30


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((-1, 3), {}, "num_points must be an integer of at least 0"),
        ((10, 0), {}, "num_dims must be an integer of at least 1"),
        ((10, 2.0), {}, "num_dims must be an integer"),
        ((10, 2), {"points_ratio": 0}, "points_ratio must be a positive number"),
        ((10, 2), {"min_per_dim": 0}, "min_per_dim must be an integer of at least 1"),
        ((10, 2), {"min_per_dim": 8, "max_per_dim": 4}, "max_per_dim must be an integer of at least 8"),
    ],
)
def test_bad_arguments_are_refused_by_name(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        suggest_num_features(*args, **kwargs)


def test_oversized_means_more_than_twice_the_rule_and_the_points():
    assert is_oversized(40, 1024, 6)  # 1024 > 2 * max(40, 192)
    assert not is_oversized(40, 384, 6)
    assert is_oversized(1000, 2002, 1) and not is_oversized(1000, 2000, 1)  # the points, not the rule, bound it


class _Kernel:
    """A stand-in for a kernel object (the monitor holds them weakly)."""


def test_the_monitor_warns_once_at_the_second_oversized_kernel():
    monitor = RefitMonitor()
    first, second, third = _Kernel(), _Kernel(), _Kernel()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        monitor.note_fit(first, 40, 192, 6)  # sized by the rule: never counted
        monitor.note_fit(second, 40, 192, 6)
        monitor.note_fit(first, 40, 1024, 6)
        monitor.note_fit(first, 40, 1024, 6)  # the same model evaluated again (an optimiser's steps)
        assert not caught  # one model may be a one-off
        monitor.note_fit(second, 41, 1024, 6)
        monitor.note_fit(third, 42, 1024, 6)
    assert [type(w.message) for w in caught] == [OversizedFeaturesWarning]
    assert "suggest_num_features(41, 6) = 192" in str(caught[0].message)
    assert "num_features='auto'" in str(caught[0].message)
