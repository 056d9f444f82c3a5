"""independent_factors: which feature maps share draws, the copy with its own draws (same parameters), and which
factors are replaced."""

from __future__ import annotations

import copy

import torch
from gpytorch.kernels import ScaleKernel

from gprf.kernels import PolynomialSketchKernel, RandomFourierKernel
from gprf.kernels.independent_factors import feature_maps, independent_factors, shares_draws, with_own_draws


def test_shared_draws_are_recognised():
    seeded = RandomFourierKernel(8, num_dims=2, seed=0)
    assert shares_draws(seeded.feature_map, seeded.feature_map)
    # One seed: the same random numbers, whatever the maps do with them.
    assert shares_draws(seeded.feature_map, RandomFourierKernel(8, num_dims=2, kernel="matern52", seed=0).feature_map)
    assert shares_draws(seeded.feature_map, PolynomialSketchKernel(8, num_dims=2, degree=2, seed=0).feature_map)
    unseeded = RandomFourierKernel(8, num_dims=2)
    assert shares_draws(unseeded.feature_map, copy.deepcopy(unseeded).feature_map)  # equal draws, no seed
    assert not shares_draws(seeded.feature_map, RandomFourierKernel(8, num_dims=2, seed=1).feature_map)
    assert not shares_draws(unseeded.feature_map, RandomFourierKernel(8, num_dims=2).feature_map)


def test_the_copy_shares_every_parameter_and_draws_its_own_features():
    kernel = ScaleKernel(RandomFourierKernel(8, num_dims=2, seed=0))
    other = RandomFourierKernel(8, num_dims=2, seed=5)
    copied = with_own_draws(kernel, feature_maps(kernel) + feature_maps(other))
    assert [id(p) for p in copied.parameters()] == [id(p) for p in kernel.parameters()]
    original, redrawn = kernel.base_kernel.feature_map, copied.base_kernel.feature_map
    assert redrawn.seed not in (0, 5, None) and redrawn.draw_version != original.draw_version
    assert not torch.equal(redrawn.frequencies, original.frequencies)
    # Reproducible: the same seed gives the same copy.
    again = with_own_draws(kernel, feature_maps(kernel) + feature_maps(other))
    torch.testing.assert_close(again.base_kernel.feature_map.frequencies, redrawn.frequencies, rtol=0, atol=0)
    # Unseeded maps draw from the global RNG.
    unseeded = RandomFourierKernel(8, num_dims=2)
    assert with_own_draws(unseeded, feature_maps(unseeded)).feature_map.seed is None


def test_only_factors_that_repeat_draws_are_replaced():
    first = RandomFourierKernel(8, num_dims=2, seed=0)
    second = RandomFourierKernel(8, num_dims=2, seed=1)
    assert independent_factors((first, second)) == (first, second)
    kept, replaced, third = independent_factors((first, first, second))
    assert kept is first and third is second and replaced is not first
    others = [first.feature_map, second.feature_map]
    assert not any(shares_draws(mine, other) for mine in feature_maps(replaced) for other in others)
