"""``fit_mll``'s time budget on a simulated clock: the probes measure the simulated costs, the refit grows only to the
largest nested prefix that fits, the warning gives the estimate, and the fit returns within the budget."""

from __future__ import annotations

import importlib
import math
import warnings
from contextlib import ExitStack
from functools import partial
from unittest import mock

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood

import gprf
from gprf.exceptions import BudgetWarning
from gprf.fitting import budget, scale_statistics
from gprf.fitting.budget import PREFIX_GRANULE, RefitCost, probe_refit_cost, probe_sizes
from gprf.fitting.growth import FeatureGrowth
from gprf.fitting.recipe import _decompose
from gprf.fitting.scale_fit import training_feature_sums
from gprf.fitting.scale_statistics import FeatureSums, ScaleStatistics
from gprf.kernels import RandomFourierKernel

# The module (gprf.linalg re-exports its function under the same name).
weighted_gram_module = importlib.import_module("gprf.linalg.weighted_gram")

# Simulated seconds per N F^2 of a Gram matrix and per F^3 of an eigendecomposition (every other step is free).
GRAM_RATE, CUBIC_RATE = 1e-6, 2e-7
NUM_ROWS, NUM_FEATURES, TUNE_FEATURES = 1200, 512, 64


class _SimulatedTime:
    """A clock that advances only by the simulated cost of the Gram matrices and eigendecompositions formed."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def patches(self) -> ExitStack:
        gram, spectral = weighted_gram_module.symmetric_gram, scale_statistics.spectral_projections

        def timed_gram(a):
            self.now += GRAM_RATE * a.size(-2) * a.size(-1) ** 2
            return gram(a)

        def timed_spectral(matrix, rhs, method="auto"):
            self.now += CUBIC_RATE * matrix.size(-1) ** 3
            return spectral(matrix, rhs, method=method)

        stack = ExitStack()
        stack.enter_context(mock.patch.object(budget, "perf_counter", self))
        # The refit's sums and every marginal likelihood and prediction cache (tuning steps included) form Grams.
        stack.enter_context(mock.patch.object(scale_statistics, "symmetric_gram", timed_gram))
        stack.enter_context(mock.patch.object(weighted_gram_module, "symmetric_gram", timed_gram))
        stack.enter_context(mock.patch.object(scale_statistics, "spectral_projections", timed_spectral))
        return stack


class _GP(gpytorch.models.ExactGP):
    def __init__(self, x, y, kernel):
        super().__init__(x, y, GaussianLikelihood())
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = ScaleKernel(kernel)

    def forward(self, x):
        return gprf.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _mll() -> ExactMarginalLogLikelihood:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(NUM_ROWS, 3, generator=generator, dtype=torch.float64) * 4 - 2
    y = torch.sin(2 * x[:, 0]) * torch.cos(x[:, 1]) + 0.1 * torch.randn(NUM_ROWS, generator=generator)
    kernel = RandomFourierKernel(NUM_FEATURES, num_dims=3, ard_num_dims=3, sampler="orthogonal", seed=1)
    model = _GP(x, y.double(), kernel).double()
    return ExactMarginalLogLikelihood(model.likelihood, model)


def _refit_seconds(num_features: int) -> float:
    return GRAM_RATE * NUM_ROWS * num_features**2 + CUBIC_RATE * num_features**3


def _largest_prefix_that_fits(seconds: float) -> int:
    if _refit_seconds(NUM_FEATURES) <= seconds:
        return NUM_FEATURES
    fitting = [f for f in range(PREFIX_GRANULE, NUM_FEATURES, PREFIX_GRANULE) if _refit_seconds(f) <= seconds]
    return max([TUNE_FEATURES, *(f for f in fitting if f > TUNE_FEATURES)])


def _fit(time_budget: float, grow: str) -> tuple[ExactMarginalLogLikelihood, dict, list[warnings.WarningMessage]]:
    """Fit on the simulated clock: the model, the fit's seconds at the end of each stage ("tune", "scale", "end"),
    of its last tuning step and of its longest, and the budget warnings."""
    mll, clock, seen, steps = _mll(), _SimulatedTime(), {}, []

    def record(stage: str, seconds: float) -> None:
        if stage.startswith("tune "):
            steps.append(seconds)
        else:
            seen[stage] = seconds

    with clock.patches(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gprf.fit_mll(
            mll,
            time_budget=time_budget,
            grow=grow,
            tune_features=TUNE_FEATURES,
            tune_rows=300,
            tune_steps=1000,
            callback=record,
        )
        seen["end"] = clock.now
    seen["longest step"] = max(later - earlier for earlier, later in zip(steps, steps[1:], strict=False))
    seen["last step"] = steps[-1]
    return mll, seen, [w for w in caught if issubclass(w.category, BudgetWarning)]


def _probe() -> tuple[RefitCost, float]:
    """The fit's probe of the refit's cost, and its simulated seconds."""
    clock = _SimulatedTime()
    mll = _mll()
    growth = FeatureGrowth(mll, [mll.model.covar_module.base_kernel], TUNE_FEATURES)
    rows, cap = probe_sizes(NUM_ROWS, NUM_FEATURES)
    assert (rows, cap) == (NUM_ROWS // 8, NUM_FEATURES // 4)
    with clock.patches(), growth.capped(cap):
        form_sums = partial(training_feature_sums, mll)
        cost = probe_refit_cost(torch.device("cpu"), form_sums, _decompose, rows, cap, NUM_FEATURES)
    return cost, clock.now


def test_the_probe_measures_the_rates_of_the_refits_own_steps():
    cost, seconds = _probe()
    assert cost.gram_rate == pytest.approx(GRAM_RATE, rel=1e-12)
    assert cost.cubic_rate == pytest.approx(CUBIC_RATE, rel=1e-12)
    assert seconds < _refit_seconds(NUM_FEATURES) / 16


def test_a_budget_the_full_refit_cannot_meet_keeps_the_largest_prefix_that_fits():
    time_budget = 100.0
    assert _refit_seconds(NUM_FEATURES) > time_budget  # the refit at F = 512 alone would take 341 s
    mll, seen, budget_warnings = _fit(time_budget, grow="fit")
    # Nothing consumes simulated time between the end of tuning and the decision: what was left then is known.
    left = time_budget - seen["tune"]
    kept = _largest_prefix_that_fits(left)
    assert TUNE_FEATURES < kept < NUM_FEATURES
    assert mll.model.covar_module.base_kernel.num_features == kept
    assert len(budget_warnings) == 1
    message = str(budget_warnings[0].message)
    assert f"estimated at {_refit_seconds(NUM_FEATURES):.1f} s" in message
    assert (
        f"keep the first {kept} features" in message and f"refit estimated at {_refit_seconds(kept):.1f} s" in message
    )
    # Tuning kept half the budget less the second probe's time (up to the step that would have crossed that), the
    # refit the rest, and the prediction cache came from the refit: no Gram matrix formed after it.
    _, probe_seconds = _probe()
    tuning_limit = time_budget / 2 - probe_seconds
    assert tuning_limit - seen["longest step"] < seen["last step"] <= tuning_limit
    assert seen["end"] == pytest.approx(seen["tune"] + _refit_seconds(kept), rel=1e-12)
    assert seen["end"] <= time_budget


def test_grow_full_warns_with_the_estimate_and_keeps_every_feature():
    mll, seen, budget_warnings = _fit(100.0, grow="full")
    assert mll.model.covar_module.base_kernel.num_features == NUM_FEATURES
    assert len(budget_warnings) == 1
    message = str(budget_warnings[0].message)
    assert f"estimated at {_refit_seconds(NUM_FEATURES):.1f} s" in message
    assert "it runs anyway (grow='full')" in message
    # Tuning still kept its half of the budget; the full refit overran the rest.
    tuning_limit = 50.0 - _probe()[1]
    assert tuning_limit - seen["longest step"] < seen["last step"] <= tuning_limit
    assert seen["end"] == pytest.approx(seen["tune"] + _refit_seconds(NUM_FEATURES), rel=1e-12)


def test_a_budget_the_refit_meets_keeps_the_model_whole_without_a_warning():
    time_budget = 2 * _refit_seconds(NUM_FEATURES) + 100.0
    mll, seen, budget_warnings = _fit(time_budget, grow="fit")
    assert mll.model.covar_module.base_kernel.num_features == NUM_FEATURES and not budget_warnings
    assert seen["end"] <= time_budget


def test_the_largest_cap_is_searched_over_multiples_of_the_granule():
    cost = RefitCost(gram_rate=GRAM_RATE, cubic_rate=CUBIC_RATE)
    for seconds in (0.0, 5.0, 44.3, 45.9, 100.0, 400.0):
        expected = _largest_prefix_that_fits(seconds)
        assert cost.largest_cap(NUM_ROWS, seconds, lambda cap: cap, NUM_FEATURES, TUNE_FEATURES) == expected
    assert math.isclose(cost.seconds(NUM_ROWS, NUM_FEATURES), _refit_seconds(NUM_FEATURES))


def test_grow_is_checked():
    with pytest.raises(ValueError, match="grow must be 'fit' or 'full'"):
        gprf.fit_mll(_mll(), grow="some")
    with pytest.raises(TypeError, match="grow must be 'fit' or 'full'"):
        gprf.fit_mll(_mll(), grow=None)


def test_feature_sums_are_shared_by_the_statistics():
    features = torch.randn(20, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    residual = torch.randn(20, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    sums = FeatureSums.from_chunks([(features, residual)])
    torch.testing.assert_close(sums.gram, features.mT @ features)
    torch.testing.assert_close(sums.projections[:, 0], features.mT @ residual)
    torch.testing.assert_close(sums.projections[:, 1], features.sum(0))
    direct = ScaleStatistics.from_chunks([(features, residual)])
    torch.testing.assert_close(ScaleStatistics.from_sums(sums).eigenvalues, direct.eigenvalues)


def test_the_stand_in_for_timing_a_gpus_cubic_steps_is_positive_definite():
    sums = budget._spd_sums(64, torch.zeros((), dtype=torch.float64))
    assert sums.gram.shape == (64, 64) and sums.projections.shape == (64, 2)
    assert torch.linalg.eigvalsh(sums.gram).min().item() >= 1.0 - 1e-12
