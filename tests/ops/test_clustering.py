"""Farthest-point clustering: covering radius, greedy order, assignment, cap, batches, devices, bad input."""

from __future__ import annotations

import pytest
import torch

from gprf.ops import farthest_point_clustering, nearest_center


def _points(n=200, d=3, seed=0, batch=(), device="cpu"):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*batch, n, d, generator=generator, dtype=torch.float64).to(device)


def _cdist(a, b):
    return torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")


def test_covers_points_within_threshold(device):
    x = _points(device=device)
    result = farthest_point_clustering(x, threshold=1.0)
    distances = _cdist(x, result.centers)
    nearest = distances.min(-1).values
    assert nearest.max() < 1.0
    torch.testing.assert_close(result.radius, nearest.max())
    # The first centre is the mean; every other centre is a data point.
    torch.testing.assert_close(result.centers[0], x.mean(0))
    assert (_cdist(result.centers[1:], x).min(-1).values == 0).all()
    # One step fewer would not cover: the last centre was needed.
    assert _cdist(x, result.centers[:-1]).min(-1).values.max() >= 1.0
    assert result.centers.device == x.device


def test_greedy_order_and_assignment():
    x = _points(n=150, d=2, seed=1)
    result = farthest_point_clustering(x, threshold=0.5)
    for k in range(1, result.num_centers):
        # Centre k is the point farthest from centres 0..k-1.
        previous = _cdist(x, result.centers[:k]).min(-1).values
        torch.testing.assert_close(result.centers[k], x[previous.argmax()])
    index, distance = nearest_center(x, result.centers)
    torch.testing.assert_close(result.assignment, index)
    torch.testing.assert_close(distance, _cdist(x, result.centers).min(-1).values)


def test_cap_and_tiny_threshold():
    x = _points(n=40, d=2, seed=2)
    capped = farthest_point_clustering(x, threshold=1e-3, max_centers=5)
    assert capped.num_centers == 5 and capped.radius >= 1e-3
    one = farthest_point_clustering(x, threshold=1e-3, max_centers=1)
    torch.testing.assert_close(one.centers, x.mean(0, keepdim=True))
    assert (one.assignment == 0).all()
    # Below the smallest pairwise distance every point becomes a centre (plus the mean).
    every = farthest_point_clustering(x, threshold=1e-9)
    assert every.num_centers == 41 and every.radius == 0
    assert torch.equal(torch.sort(every.assignment).values, torch.arange(1, 41))


def test_batches_are_covered_independently(device):
    x = _points(n=100, d=2, batch=(3,), device=device) * torch.tensor([0.5, 1.0, 2.0], device=device).view(3, 1, 1)
    result = farthest_point_clustering(x, threshold=0.8)
    assert result.centers.shape[:-2] == (3,) and result.assignment.shape == (3, 100)
    for b in range(3):
        nearest = _cdist(x[b], result.centers[b]).min(-1)
        assert nearest.values.max() < 0.8
        torch.testing.assert_close(result.radius[b], nearest.values.max())
        torch.testing.assert_close(result.assignment[b], nearest.indices)
    # The widest member needs the most centres; the loop ran until it was covered.
    alone = farthest_point_clustering(x[2], threshold=0.8)
    torch.testing.assert_close(result.centers[2], alone.centers)


def test_bad_input():
    x = _points(n=10)
    for threshold in (0.0, -1.0, float("nan"), float("inf"), True):
        with pytest.raises(ValueError, match="threshold"):
            farthest_point_clustering(x, threshold)
    with pytest.raises(ValueError, match="max_centers"):
        farthest_point_clustering(x, 1.0, max_centers=0)
    with pytest.raises(ValueError, match="n >= 1"):
        farthest_point_clustering(x[:0], 1.0)
    with pytest.raises(TypeError, match="floating-point"):
        farthest_point_clustering(torch.ones(5, 2, dtype=torch.long), 1.0)
    with pytest.raises(ValueError, match="columns"):
        nearest_center(x, torch.zeros(2, 4, dtype=torch.float64))
