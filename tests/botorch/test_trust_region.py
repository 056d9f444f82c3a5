"""gprf.botorch.trust_region: the region grows and shrinks by TuRBO's rule, its box follows the lengthscales inside
the unit cube, its candidates stay in the box and near the centre, and Thompson sampling picks distinct candidates
that maximise the sample paths."""

from __future__ import annotations

import math
from unittest import mock

import pytest
import torch
from botorch.exceptions.errors import BotorchTensorDimensionError
from botorch.fit import fit_gpytorch_mll
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.mlls import ExactMarginalLogLikelihood

import gprf.botorch
import gprf.botorch.trust_region as trust_region
from gprf.botorch.trust_region import TrustRegion, model_lengthscale, thompson_sample
from gprf.kernels import unwrap_scale_kernel
from tests.botorch.conftest import make_botorch_model

pytestmark = pytest.mark.botorch


def test_length_doubles_after_successes_and_halves_after_failures():
    region = TrustRegion(dim=20, batch_size=10, success_tolerance=2)
    assert region.failure_tolerance == 2  # ceil(max(4, 20) / 10)
    region.update(torch.tensor([0.5, 0.2]))  # the initial design: neither a success nor a failure
    region.update(torch.tensor([1.0, 0.5]))
    region.update(torch.tensor([2.0]))
    assert region.length == pytest.approx(1.6) and region.best_value == 2.0  # two successes: doubled
    region.update(torch.tensor([2.001]))  # within the 1e-3 relative margin: a failure
    region.update(torch.tensor([1.0]))
    assert region.length == pytest.approx(0.8) and region.best_value == pytest.approx(2.001)
    for _ in range(2 * 7):
        region.update(torch.tensor([0.0]))
    assert region.length == pytest.approx(0.8 / 2**7) and region.restart_needed


def test_bounds_scale_with_the_lengthscales_and_stay_in_the_cube():
    region = TrustRegion(dim=3, batch_size=4, length=0.4)
    center = torch.tensor([0.5, 0.5, 0.95], dtype=torch.float64)
    lower, upper = region.bounds(center, torch.tensor([1.0, 4.0, 0.25]))
    # Geometric mean 1: the weights are the lengthscales themselves; half-widths 0.2 * weight.
    torch.testing.assert_close(upper - lower, torch.tensor([0.4, 1.0, 0.05 + 0.05], dtype=torch.float64))
    assert bool((lower >= 0).all() & (upper <= 1).all())
    torch.testing.assert_close(upper[2], torch.tensor(1.0, dtype=torch.float64))  # 0.95 + 0.05 clipped


def test_candidates_are_in_the_box_and_mostly_at_the_centre_in_many_dimensions():
    dim = 40
    region = TrustRegion(dim=dim, batch_size=50, length=0.2)
    center = torch.full((dim,), 0.5, dtype=torch.float64)
    points = region.candidates(center, 2000, seed=0)
    lower, upper = region.bounds(center)
    assert points.shape == (2000, dim) and bool(((points >= lower) & (points <= upper)).all())
    moved = points != center
    assert bool(moved.any(-1).all())  # each candidate moves in at least one coordinate
    # Each coordinate moves with probability 20 / 40: binomial mean 0.5, standard error sqrt(0.25 / 80000).
    assert abs(moved.double().mean().item() - 0.5) < 4.5 * math.sqrt(0.25 / moved.numel())


def test_model_lengthscale_reads_the_ard_kernel():
    model = make_botorch_model(num_outputs=2)
    expected = unwrap_scale_kernel(model.covar_module).lengthscale.detach().reshape(2, 3).mean(0)
    torch.testing.assert_close(model_lengthscale(model), expected)


def test_thompson_sample_takes_each_paths_best_untaken_candidate():
    model = make_botorch_model()
    model.eval()
    candidates = torch.rand(50, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    # Two paths that agree on the best candidate: the second takes its runner-up.
    values = torch.zeros(2, 50, dtype=torch.float64)
    values[:, 7] = 3.0
    values[1, 11] = 2.0
    paths = mock.Mock(return_value=values.unsqueeze(-1))
    with mock.patch.object(trust_region, "draw_matheron_paths", return_value=paths):
        chosen = thompson_sample(model, candidates, 2)
    torch.testing.assert_close(chosen, candidates[[7, 11]])


def test_thompson_sample_in_the_region_improves_a_smooth_function():
    """Six batches of trust-region Thompson sampling with a gprf model on a 10-dimensional concave quadratic."""
    generator = torch.Generator().manual_seed(0)
    dim, q = 10, 8

    def objective(x):
        return -(x - 0.3).square().sum(-1, keepdim=True)

    x = torch.rand(40, dim, generator=generator, dtype=torch.float64)
    y = objective(x)
    region = TrustRegion(dim=dim, batch_size=q)
    region.update(y)
    start = y.max().item()
    for step in range(6):
        model = gprf.botorch.RandomFeatureSingleTaskGP(x, y, num_features=256, seed=step)
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        center = x[y.argmax()]
        candidates = region.candidates(center, 1000, model_lengthscale(model), seed=step)
        torch.manual_seed(step)
        batch = thompson_sample(model, candidates, q)
        values = objective(batch)
        region.update(values)
        x, y = torch.cat([x, batch]), torch.cat([y, values])
    assert y.max().item() > start + 0.5 * abs(start)  # the best value's distance from the optimum at least halves


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(dim=0, batch_size=1), "dim must be a positive integer"),
        (dict(dim=2.0, batch_size=1), "dim must be a positive integer, got 2.0"),
        (dict(dim=2, batch_size=True), "batch_size must be a positive integer, got True"),
        (dict(dim=2, batch_size=1, success_tolerance=0), "success_tolerance must be a positive integer"),
        (dict(dim=2, batch_size=1, length=2.0), "min_length <= length <= max_length"),
        (dict(dim=2, batch_size=1, min_length=0.0), "min_length <= length <= max_length"),
        (dict(dim=2, batch_size=1, length=math.nan), "length must be a finite number, got nan"),
        (dict(dim=2, batch_size=1, max_length=math.inf), "max_length must be a finite number, got inf"),
        (dict(dim=2, batch_size=1, length="0.8"), "length must be a real number, got '0.8'"),
        (dict(dim=2, batch_size=1, failure_tolerance=0), "failure_tolerance must be a positive integer"),
        # A fractional tolerance was accepted, and the failure count never equalled it: the region never shrank.
        (dict(dim=2, batch_size=1, failure_tolerance=2.5), "failure_tolerance must be a positive integer, got 2.5"),
        (dict(dim=2, batch_size=1, failure_tolerance=True), "failure_tolerance must be a positive integer, got True"),
        (dict(dim=2, batch_size=1, improvement=-0.1), "improvement must be >= 0"),
        (dict(dim=2, batch_size=1, improvement=math.nan), "improvement must be a finite number"),
        (dict(dim=2, batch_size=1, successes=3), r"successes must be an integer in \[0, success_tolerance\)"),
        (dict(dim=2, batch_size=1, failures=-1), r"failures must be an integer in \[0, failure_tolerance\)"),
        (dict(dim=2, batch_size=1, best_value=math.nan), "best_value must be a number below \\+inf"),
        (dict(dim=2, batch_size=1, best_value=math.inf), "best_value must be a number below \\+inf"),
    ],
)
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TrustRegion(**kwargs)


def test_numbers_may_be_one_element_tensors():
    region = TrustRegion(
        dim=2, batch_size=1, length=torch.tensor(0.4, dtype=torch.float64), best_value=torch.tensor([2.5])
    )
    assert (region.length, region.best_value) == (0.4, 2.5) and isinstance(region.best_value, float)
    with pytest.raises(ValueError, match="best_value must be a real number, got tensor"):
        TrustRegion(dim=2, batch_size=1, best_value=torch.tensor([1.0, 2.0]))


def test_nan_values_are_ignored():
    region = TrustRegion(dim=2, batch_size=2)
    region.update(torch.tensor([1.0, math.nan]))  # was: best_value NaN for good
    assert region.best_value == 1.0
    region.update([5.0, math.nan])  # was: the improvement lost and a failure counted
    assert (region.best_value, region.successes, region.failures) == (5.0, 1, 0)
    region.update(torch.tensor([[math.nan], [math.nan]]))  # only failed evaluations: no improvement
    assert (region.best_value, region.successes, region.failures) == (5.0, 0, 1)
    region.update(torch.tensor([math.nan, 4.0]))
    assert region.failures == 0 and region.length == pytest.approx(0.4)  # two failures (tolerance 2): halved
    assert region.best_value == 5.0


def test_bad_values_are_refused():
    region = TrustRegion(dim=2, batch_size=2)
    with pytest.raises(ValueError, match="every value of the initial design is NaN"):
        region.update(torch.tensor([math.nan, math.nan]))
    assert region.best_value == -math.inf
    with pytest.raises(ValueError, match="infinite objective value"):
        region.update(torch.tensor([1.0, math.inf]))
    with pytest.raises(ValueError, match=r"shape \(q,\) or \(q, 1\).*got shape \(3, 2\)"):
        region.update(torch.zeros(3, 2))
    with pytest.raises(ValueError, match=r"at least one evaluated point.*got shape \(0,\)"):
        region.update(torch.zeros(0))
    with pytest.raises(TypeError, match="real objective values"):
        region.update(torch.ones(2, dtype=torch.complex64))
    assert region.best_value == -math.inf and region.failures == 0


@pytest.mark.parametrize(
    "center, lengthscale, message",
    [
        ([math.nan, 0.5], None, r"unit cube \[0, 1\]\^d .* no NaN, got \[nan, 0.5\]"),
        ([0.5, 0.5], [0.0, 1.0], "lengthscale must be positive and finite"),
        ([0.5, 0.5], [-1.0, 1.0], "lengthscale must be positive and finite"),
        ([0.5, 0.5], [math.nan, 1.0], "lengthscale must be positive and finite"),
        ([0.5, 0.5], [math.inf, 1.0], "lengthscale must be positive and finite"),
    ],
)
def test_nan_centres_and_bad_lengthscales_are_refused(center, lengthscale, message):
    region = TrustRegion(dim=2, batch_size=2)
    lengthscale = None if lengthscale is None else torch.tensor(lengthscale, dtype=torch.float64)
    with pytest.raises(ValueError, match=message):
        region.candidates(torch.tensor(center, dtype=torch.float64), 4, lengthscale)


def test_bad_candidate_counts_and_seeds_are_refused():
    region = TrustRegion(dim=2, batch_size=2)
    center = torch.full((2,), 0.5, dtype=torch.float64)
    with pytest.raises(ValueError, match="num_candidates must be a positive integer, got 2.5"):
        region.candidates(center, 2.5)
    with pytest.raises(TypeError, match="seed must be an int or None"):
        region.candidates(center, 4, seed=1.0)
    with pytest.raises(TypeError, match=r"center must be a floating-point tensor of shape \(2,\)"):
        region.bounds(torch.tensor([0, 1]))


def test_bad_centres_and_sample_counts_are_named():
    region = TrustRegion(dim=3, batch_size=2)
    with pytest.raises(ValueError, match=r"center must be one point of shape \(3,\)"):
        region.bounds(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="unit cube"):
        region.bounds(torch.tensor([0.5, 1.5, 0.5]))
    model = make_botorch_model()
    with pytest.raises(ValueError, match="num_samples must be an integer between 1 and the 4 candidates, got 5"):
        thompson_sample(model, torch.rand(4, 3, dtype=torch.float64), 5)
    # This model normalises its inputs: BoTorch's input transform names the widths first.
    with pytest.raises(BotorchTensorDimensionError, match="Received 5, expected 3"):
        thompson_sample(model.eval(), torch.rand(4, 5, dtype=torch.float64), 2)


def test_thompson_sample_refuses_nan_candidates_and_non_integer_counts():
    model = make_botorch_model().eval()
    candidates = torch.rand(6, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="num_samples must be an integer between 1 and the 6 candidates, got 2.0"):
        thompson_sample(model, candidates, 2.0)
    candidates[2, 1] = math.nan
    with pytest.raises(ValueError, match="candidates hold NaN"):
        thompson_sample(model, candidates, 2)


def _fantasy_model(num_fantasies: int = 3):
    model = make_botorch_model(n=30, num_features=32).eval()
    new_x = torch.rand(2, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    return model.fantasize(new_x, SobolQMCNormalSampler(torch.Size([num_fantasies]), seed=0))


def test_thompson_sample_on_a_fantasy_model_samples_each_fantasy():
    """A fantasy model (batch shape [3]) raised "expanded size"; now each fantasy gets its own q points."""
    fantasy = _fantasy_model()
    candidates = torch.rand(40, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    # Known path values: fantasy b's paths all peak at candidate 10 + b, runners-up 20 + b and 30 + b.
    values = torch.zeros(3, 3, 40, dtype=torch.float64)  # paths x fantasies x candidates
    for b in range(3):
        values[:, b, 10 + b] = 3.0
        values[1:, b, 20 + b] = 2.0
        values[2, b, 30 + b] = 1.0
    paths = mock.Mock(return_value=values)
    with mock.patch.object(trust_region, "draw_matheron_paths", return_value=paths):
        chosen = thompson_sample(fantasy, candidates, 3)
    expected = torch.stack([candidates[[10 + b, 20 + b, 30 + b]] for b in range(3)])
    torch.testing.assert_close(chosen, expected, rtol=0, atol=0)
    # The real paths of the fantasy model: three distinct candidates per fantasy.
    torch.manual_seed(0)
    chosen = thompson_sample(fantasy, candidates, 3)
    assert chosen.shape == (3, 3, 3)
    for batch in chosen:
        rows = (batch.unsqueeze(-2) == candidates).all(-1).nonzero()[:, 1]
        assert rows.unique().numel() == 3


def test_thompson_sample_featurises_each_input_set_once():
    # The training inputs once (for the update weights), the candidates once (for the prior and update paths alike).
    model = make_botorch_model(n=30, num_features=32).eval()
    kernel_type = type(unwrap_scale_kernel(model.covar_module))
    candidates = torch.rand(50, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    with mock.patch.object(kernel_type, "features", autospec=True, side_effect=kernel_type.features) as spy:
        torch.manual_seed(0)
        chosen = thompson_sample(model, candidates, 4)
    featurised = [call.args[1] for call in spy.call_args_list]
    assert [tuple(points.shape) for points in featurised] == [(30, 3), (50, 3)]
    (train_x,) = model.train_inputs
    assert torch.equal(featurised[0], train_x) and torch.equal(featurised[1], model.transform_inputs(candidates))
    assert chosen.shape == (4, 3)
