"""gprf.linalg.route: the cheaper of the points and features routes, the forced routes and their memory bound."""

from __future__ import annotations

import pytest
import torch

import gprf
from gprf.linalg import choose_route, route_costs


@pytest.mark.parametrize(
    ("num_points", "num_columns", "expected"), [(20, 512, "points"), (511, 512, "points"), (513, 512, "features")]
)
def test_likelihood_takes_the_points_route_below_as_many_points_as_features(num_points, num_columns, expected):
    # N^2 F + N^3/3 < N F^2 + F^3/3 exactly when N < F.
    assert choose_route("likelihood", num_points, num_columns) == expected


def test_prediction_compares_the_cost_per_call():
    # Per call: M (N F + N^2) + M^2 (F + N) against M F^2 + M^2 F (M <= F).
    points, features = route_costs("prediction", 20, 512, num_test=128)
    assert points == 128 * (20 * 512 + 400) + 128**2 * (512 + 20)
    assert features == 128 * 512**2 + 128**2 * 512
    assert choose_route("prediction", 20, 512, num_test=128) == "points"
    assert choose_route("prediction", 400, 512, num_test=4) == "features"  # 400 (512 + 400) > 512^2
    assert choose_route("prediction", 20, 64, num_test=500) == "features"  # more test points than features


def test_pathwise_counts_the_paths():
    points, features = route_costs("pathwise", 100, 256, num_samples=8)
    assert points == 100**2 * 256 + 100**3 / 3 + 2 * 8 * (100 * 256 + 100**2)
    assert features == 100 * 256**2 + 4 * 256**3 / 3 + 3 * 8 * 256**2
    assert choose_route("pathwise", 100, 256, num_samples=8) == "points"
    assert choose_route("pathwise", 1000, 256, num_samples=8) == "features"


def test_forced_routes_and_the_memory_bound():
    with gprf.settings.covariance_route("features"):
        assert choose_route("likelihood", 2, 512) == "features"
    with gprf.settings.covariance_route("points"):
        assert choose_route("likelihood", 5000, 64) == "points"
        # 20000^2 float64 entries are 3.2 GB, over the default 2 GiB: a clear error naming the setting.
        with pytest.raises(ValueError, match=r"covariance_route\('points'\) would form 1 matrices of 20000 x 20000"):
            choose_route("likelihood", 20000, 64)
    with gprf.settings.covariance_route("points", max_points_bytes=10 * 10 * 8 * 3 - 1):
        assert choose_route("prediction", 10, 64, (2,), num_test=5) == "points"
        with pytest.raises(ValueError, match="max_points_bytes=2399"):
            choose_route("prediction", 10, 64, (3,), num_test=5)
    # "auto" takes the features route where the points route would not fit, whatever its cost.
    with gprf.settings.covariance_route("auto", max_points_bytes=100):
        assert choose_route("likelihood", 20, 512) == "features"


def test_the_memory_bound_counts_the_factor_dtype():
    with gprf.settings.covariance_route("points", max_points_bytes=10 * 10 * 4):
        with pytest.raises(ValueError, match="max_points_bytes"):
            choose_route("likelihood", 10, 64)
        with gprf.settings.factor_dtype(torch.float32):
            assert choose_route("likelihood", 10, 64) == "points"


def test_unknown_use_is_refused():
    with pytest.raises(ValueError, match="use must be one of likelihood, prediction, pathwise"):
        route_costs("training", 10, 10)
