"""gprf.conversion.budget: the even split with exact parts paid first, dict overrides that siblings share around,
callable overrides asked at every part, and the errors naming num_features and unknown paths."""

from __future__ import annotations

import pytest
from gpytorch.kernels import IndexKernel, LinearKernel, MaternKernel, RBFKernel, ScaleKernel

import gprf
from gprf.conversion import Budget, split_evenly
from gprf.kernels import unwrap_scale_kernel


def _columns(approximation) -> list[int]:
    return [unwrap_scale_kernel(part).root_dim for part in approximation.kernels]


def test_split_evenly_gives_the_remainder_to_the_first_parts():
    assert split_evenly(10, 3, "root") == [4, 3, 3]
    assert split_evenly(5, 0, "root") == []
    with pytest.raises(ValueError, match="num_features is too small: 2 feature.* 3 random parts of the sum at root"):
        split_evenly(2, 3, "root")


def test_sums_pay_exact_parts_their_width_and_split_the_rest():
    kernel = ScaleKernel(RBFKernel()) + LinearKernel() + MaternKernel() + IndexKernel(num_tasks=3, rank=1)
    # 3 linear columns and 1 + 3 task columns first, then 100 - 7 = 93 -> 47 (46 even) and 46 Fourier features.
    approximation = gprf.random_features(kernel, 100, num_dims=3, seed=0)
    assert _columns(approximation) == [46, 3, 46, 4]


def test_dict_overrides_fix_parts_and_the_others_share_the_rest():
    kernel = RBFKernel() + RBFKernel() + MaternKernel()
    approximation = gprf.random_features(kernel, 100, num_dims=2, budget={"kernels.0": 60}, seed=0)
    assert _columns(approximation) == [60, 20, 20]
    nested = ScaleKernel(RBFKernel() + MaternKernel())
    approximation = gprf.random_features(nested, 64, num_dims=2, budget={"base_kernel.kernels.1": 8}, seed=0)
    assert _columns(approximation.base_kernel) == [56, 8]


def test_callable_overrides_are_asked_at_every_part():
    asked = []

    def budget(path, kernel, proposed):
        asked.append((path, type(kernel).__name__, proposed))
        return 16 if isinstance(kernel, MaternKernel) else proposed

    approximation = gprf.random_features(RBFKernel() + MaternKernel(), 64, num_dims=2, budget=budget, seed=0)
    assert _columns(approximation) == [32, 16]
    assert asked == [("", "AdditiveKernel", 64), ("kernels.0", "RBFKernel", 32), ("kernels.1", "MaternKernel", 32)]


def test_bad_budgets():
    with pytest.raises(TypeError, match="budget must be a dict"):
        Budget(3)
    with pytest.raises(ValueError, match=r"budget\['kernels.0'\]: the number of features must be a positive"):
        gprf.random_features(RBFKernel() + RBFKernel(), 64, num_dims=2, budget={"kernels.0": 0})
    with pytest.raises(ValueError, match="valid paths are"):
        gprf.random_features(RBFKernel(), 64, num_dims=2, budget={"base_kernel": 8})
    with pytest.raises(ValueError, match="num_features is too small: 1 feature"):
        gprf.random_features(RBFKernel() + RBFKernel() + RBFKernel(), 64, num_dims=2, budget={"kernels.0": 63})
