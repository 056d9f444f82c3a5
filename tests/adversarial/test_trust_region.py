"""Adversarial use of :class:`gprf.botorch.TrustRegion` and :func:`gprf.botorch.thompson_sample`: every field out of
range, NaN and infinite objective values, centres and lengthscales outside the cube, and candidate sets the sampler
must refuse."""

from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("botorch")

from gprf.botorch import RandomFeatureSingleTaskGP, TrustRegion, model_lengthscale, thompson_sample

pytestmark = pytest.mark.botorch


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"dim": 0}, "dim must be a positive integer, got 0"),
        ({"dim": 2.0}, "dim must be a positive integer"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"success_tolerance": 0}, "success_tolerance must be a positive integer"),
        ({"failure_tolerance": 2.5}, "failure_tolerance must be a positive integer, got 2.5"),
        ({"failure_tolerance": 0}, "failure_tolerance must be a positive integer"),
        ({"length": 2.0}, "0 < min_length <= length <= max_length"),
        ({"min_length": 0.0}, "0 < min_length <= length <= max_length"),
        ({"length": math.nan}, "length must be a finite number"),
        ({"max_length": math.inf}, "max_length must be a finite number"),
        ({"length": "big"}, "length must be a real number"),
        ({"improvement": -0.1}, "improvement must be >= 0"),
        ({"successes": 3}, r"successes must be an integer in \[0, success_tolerance\)"),
        ({"failures": -1}, r"failures must be an integer in \[0, failure_tolerance\)"),
        ({"best_value": math.nan}, "best_value must be a number below \\+inf"),
        ({"best_value": math.inf}, "best_value must be a number below \\+inf"),
    ],
)
def test_bad_fields_are_refused_naming_them(fields, match):
    with pytest.raises(ValueError, match=match):
        TrustRegion(**{"dim": 2, "batch_size": 1, **fields})


@pytest.mark.parametrize(
    ("values", "error", "match"),
    [
        ([], ValueError, r"at least one evaluated point, shape \(q,\) or \(q, 1\)"),
        (torch.ones(2, 2), ValueError, r"got shape \(2, 2\)"),
        ("abc", TypeError, "needs real objective values .* got str"),
        (torch.tensor([1 + 1j]), TypeError, "needs real objective values, got dtype torch.complex64"),
        (torch.tensor([True]), TypeError, "got dtype torch.bool"),
        ([math.inf], ValueError, "infinite objective value"),
        ([-math.inf], ValueError, "infinite objective value"),
        ([math.nan, math.nan], ValueError, "every value of the initial design is NaN"),
    ],
)
def test_bad_objective_values_are_refused(values, error, match):
    with pytest.raises(error, match=match):
        TrustRegion(dim=2, batch_size=1).update(values)


def test_nan_values_are_ignored_and_keep_the_best_and_the_counts():
    region = TrustRegion(dim=2, batch_size=1)
    region.update(torch.tensor([1.0, math.nan]))
    assert region.best_value == 1.0
    region.update([5.0, math.nan])
    assert (region.best_value, region.successes, region.failures) == (5.0, 1, 0)
    region.update([math.nan])
    assert (region.best_value, region.successes, region.failures) == (5.0, 0, 1)


def test_failures_halve_and_successes_double_the_length_within_its_limits():
    region = TrustRegion(dim=2, batch_size=1, failure_tolerance=2, success_tolerance=1, length=0.8)
    region.update([0.0])
    region.update([-1.0])
    region.update([-1.0])
    assert region.length == 0.4
    for value in (1.0, 2.0, 4.0, 8.0):
        region.update([value])
    assert region.length == region.max_length == 1.6


@pytest.mark.parametrize(
    ("center", "lengthscale", "error", "match"),
    [
        (torch.tensor([0.5, math.nan]), None, ValueError, "must lie in the unit cube .* and hold no NaN"),
        (torch.tensor([0.5, 1.5]), None, ValueError, r"must lie in the unit cube \[0, 1\]\^d"),
        (torch.tensor([[0.5, 0.5]]), None, ValueError, r"center must be one point of shape \(2,\)"),
        (torch.tensor([0, 1]), None, TypeError, "center must be a floating-point tensor"),
        (torch.tensor([0.5, 0.5]), torch.tensor([0.0, 1.0]), ValueError, "lengthscale must be positive and finite"),
        (torch.tensor([0.5, 0.5]), torch.tensor([math.nan, 1.0]), ValueError, "lengthscale must be positive"),
        (torch.tensor([0.5, 0.5]), torch.tensor([1.0, 1.0, 1.0]), ValueError, "lengthscale has 3 entries"),
    ],
)
def test_bad_centres_and_lengthscales_are_refused(center, lengthscale, error, match):
    with pytest.raises(error, match=match):
        TrustRegion(dim=2, batch_size=1).bounds(center, lengthscale)


def test_bounds_are_clipped_to_the_cube_and_keep_the_geometric_mean_side():
    region = TrustRegion(dim=2, batch_size=1, length=0.8)
    bounds = region.bounds(torch.tensor([0.5, 0.95], dtype=torch.float64), torch.tensor([2.0, 0.5]))
    # sides 0.8 * [2, 0.5] around the centre, clipped
    torch.testing.assert_close(bounds, torch.tensor([[0.0, 0.75], [1.0, 1.0]], dtype=torch.float64))


def test_extreme_lengthscale_ratios_give_a_finite_box_inside_the_cube():
    center = torch.tensor([0.5, 0.5], dtype=torch.float64)
    bounds = TrustRegion(dim=2, batch_size=1).bounds(center, torch.tensor([1e300, 1e-300], dtype=torch.float64))
    torch.testing.assert_close(bounds, torch.tensor([[0.0, 0.5], [1.0, 0.5]], dtype=torch.float64))


def test_a_lengthscale_beyond_the_centres_dtype_is_refused():
    """1e300 is infinite in float32, the centre's dtype: refused as not finite rather than a NaN box."""
    with pytest.raises(ValueError, match=r"positive and finite .* got \[inf, 0.0\]"):
        TrustRegion(dim=2, batch_size=1).bounds(torch.tensor([0.5, 0.5]), torch.tensor([1e300, 1e-300]))


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_candidates": 0}, ValueError, "num_candidates must be a positive integer, got 0"),
        ({"num_candidates": 4, "seed": 1.5}, TypeError, "seed must be an int or None"),
    ],
)
def test_bad_candidate_requests_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        TrustRegion(dim=2, batch_size=1).candidates(torch.tensor([0.5, 0.5]), **kwargs)


def test_seeded_candidates_repeat_lie_in_the_box_and_keep_the_centres_dtype():
    region = TrustRegion(dim=3, batch_size=1, length=0.4)
    center = torch.tensor([0.2, 0.5, 0.9], dtype=torch.float32)
    first, again = (region.candidates(center, 64, seed=3) for _ in range(2))
    lower, upper = region.bounds(center)
    assert torch.equal(first, again) and first.dtype == torch.float32
    assert bool(((first >= lower) & (first <= upper)).all())
    assert bool((first != center).any(-1).all())  # every candidate moves in at least one coordinate


def _model(num_outputs=1):
    x = torch.rand(12, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = torch.stack([torch.sin(6 * x).sum(-1), x.sum(-1)], -1)[:, :num_outputs]
    return RandomFeatureSingleTaskGP(x, y, num_features=32, seed=0)


@pytest.mark.parametrize(
    ("candidates", "num_samples", "match"),
    [
        (torch.rand(10, 3, dtype=torch.float64), 0, "num_samples must be an integer between 1 and the 10"),
        (torch.rand(3, 3, dtype=torch.float64), 5, "between 1 and the 3 candidates, got 5"),
        (torch.rand(10, 3, dtype=torch.float64), 2.0, "num_samples must be an integer"),
        (torch.ones(10, 3, dtype=torch.long), 2, r"candidates must be a floating-point tensor of shape \(C, d\)"),
        (torch.rand(2, 10, 3, dtype=torch.float64), 2, r"got \(2, 10, 3\)"),
        (torch.full((10, 3), math.nan, dtype=torch.float64), 2, "candidates hold NaN"),
        (torch.rand(10, 2, dtype=torch.float64), 2, r"take points of shape \(\.\.\., n, 3\)"),
        (torch.full((10, 3), math.inf, dtype=torch.float64), 2, "NaN or infinite inputs"),
    ],
)
def test_thompson_sample_refuses_bad_candidates(candidates, num_samples, match):
    with pytest.raises(ValueError, match=match):
        thompson_sample(_model(), candidates, num_samples)


def test_thompson_sample_refuses_several_outputs():
    with pytest.raises(ValueError, match="needs a single-output model, got 2 outputs"):
        thompson_sample(_model(2), torch.rand(10, 3, dtype=torch.float64), 2)


def test_thompson_sample_takes_distinct_candidates():
    candidates = torch.rand(6, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    torch.manual_seed(0)
    chosen = thompson_sample(_model(), candidates, 6)
    assert sorted(map(tuple, chosen.tolist())) == sorted(map(tuple, candidates.tolist()))


def test_model_lengthscale_of_models_without_one_is_none():
    assert model_lengthscale(torch.nn.Linear(2, 1)) is None
    assert model_lengthscale(_model()).shape == (3,)
