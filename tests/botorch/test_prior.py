"""gprf.botorch.prior: prior path weights with one quasi-random point per path — standard normal and uncorrelated
for every output of a batched model, iid normals beyond Sobol's dimension limit, broadcast over the data batch
beyond the kernel's."""

from __future__ import annotations

import math

import pytest
import torch
from torch.quasirandom import SobolEngine

from gprf.botorch import path_weights
from gprf.botorch.prior import broadcast_over_data_batch

pytestmark = pytest.mark.botorch


NUM_PATHS = 20_000


Z_BOUND = 5.0


def test_path_weights_are_unbiased_per_output():
    torch.manual_seed(0)
    weights = path_weights(torch.Size([NUM_PATHS, 2, 8]), batch_ndim=1)
    assert weights.shape == (NUM_PATHS, 2, 8)
    z = weights.mean(0) / math.sqrt(1 / NUM_PATHS)
    assert z.abs().max() < Z_BOUND
    z_variance = (weights.var(0) - 1) / math.sqrt(2 / (NUM_PATHS - 1))
    assert z_variance.abs().max() < Z_BOUND


def test_weights_of_different_outputs_are_uncorrelated():
    """BoTorch's strided Sobol draws correlate the outputs' weights; one Sobol point per path does not.

    The sample correlation of independent standard normals is approximately N(0, 1 / S).
    """
    torch.manual_seed(1)
    weights = path_weights(torch.Size([NUM_PATHS, 2, 4]), batch_ndim=1)
    first, second = weights[:, 0, :], weights[:, 1, :]
    correlation = (first * second).mean(0) / (first.std(0) * second.std(0))
    assert correlation.abs().max() < Z_BOUND / math.sqrt(NUM_PATHS)


def test_beyond_sobols_dimensions_the_weights_are_iid_normals():
    shape = torch.Size([3, SobolEngine.MAXDIM + 1])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(2)
        weights = path_weights(shape, batch_ndim=0)
        torch.manual_seed(2)
        expected = torch.randn(shape, dtype=torch.float64)
    torch.testing.assert_close(weights, expected, rtol=0, atol=0)


def test_prior_weights_broadcast_over_the_data_batch_beyond_the_kernels():
    weight = torch.randn(4, 2, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)  # S x [m] x F
    # Three fantasies of a two-output model: data batch [3, 2], kernel batch [2].
    broadcast = broadcast_over_data_batch(weight, torch.Size([2]), torch.Size([3, 2]))
    assert broadcast.shape == (4, 1, 2, 8)
    torch.testing.assert_close(broadcast.squeeze(1), weight, rtol=0, atol=0)
    assert broadcast_over_data_batch(weight, torch.Size([2]), torch.Size([2])).shape == (4, 2, 8)
