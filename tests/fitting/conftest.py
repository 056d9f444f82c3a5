"""A simulated clock for ``fit_mll``'s time budget: time advances only by the simulated cost of the Gram matrices
and eigendecompositions the fit forms, so tests know what every stage costs (shared by test_budget and test_growth).
"""

from __future__ import annotations

import importlib
import warnings
from contextlib import ExitStack
from functools import partial
from unittest import mock

import torch
from gpytorch.mlls import ExactMarginalLogLikelihood

import gprf
from gprf.exceptions import BudgetWarning
from gprf.fitting import budget, scale_statistics
from gprf.fitting.budget import PREFIX_GRANULE, RefitCost, probe_refit_cost, probe_sizes
from gprf.fitting.growth import FeatureGrowth
from gprf.fitting.recipe import _decompose
from gprf.fitting.scale_fit import training_feature_sums
from gprf.kernels import RandomFourierKernel
from tests.helpers.models import scaled_gp

# The module (gprf.linalg re-exports its function under the same name).
weighted_gram_module = importlib.import_module("gprf.linalg.weighted_gram")

# Simulated seconds per N F^2 of a Gram matrix and per F^3 of an eigendecomposition (every other step is free).
GRAM_RATE, CUBIC_RATE = 1e-6, 2e-7
NUM_ROWS, NUM_FEATURES, TUNE_FEATURES = 1200, 512, 64


class SimulatedTime:
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


def simulated_mll() -> ExactMarginalLogLikelihood:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(NUM_ROWS, 3, generator=generator, dtype=torch.float64) * 4 - 2
    y = torch.sin(2 * x[:, 0]) * torch.cos(x[:, 1]) + 0.1 * torch.randn(NUM_ROWS, generator=generator)
    kernel = RandomFourierKernel(NUM_FEATURES, num_dims=3, ard_num_dims=3, sampler="orthogonal", seed=1)
    model = scaled_gp(x, y.double(), kernel).double()
    return ExactMarginalLogLikelihood(model.likelihood, model)


def refit_seconds(num_features: int) -> float:
    return GRAM_RATE * NUM_ROWS * num_features**2 + CUBIC_RATE * num_features**3


def largest_prefix_that_fits(seconds: float) -> int:
    if refit_seconds(NUM_FEATURES) <= seconds:
        return NUM_FEATURES
    fitting = [f for f in range(PREFIX_GRANULE, NUM_FEATURES, PREFIX_GRANULE) if refit_seconds(f) <= seconds]
    return max([TUNE_FEATURES, *(f for f in fitting if f > TUNE_FEATURES)])


def simulated_fit(
    time_budget: float, grow: str
) -> tuple[ExactMarginalLogLikelihood, dict, list[warnings.WarningMessage]]:
    """Fit on the simulated clock: the model, the fit's seconds at the end of each stage ("tune", "scale", "end"),
    of its last tuning step and of its longest, and the budget warnings."""
    mll, clock, seen, steps = simulated_mll(), SimulatedTime(), {}, []

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


def probe() -> tuple[RefitCost, float]:
    """The fit's probe of the refit's cost, and its simulated seconds."""
    clock = SimulatedTime()
    mll = simulated_mll()
    growth = FeatureGrowth(mll, [mll.model.covar_module.base_kernel], TUNE_FEATURES, NUM_ROWS)
    rows, cap = probe_sizes(NUM_ROWS, NUM_FEATURES)
    with clock.patches(), growth.capped(cap):
        form_sums = partial(training_feature_sums, mll)
        cost = probe_refit_cost(torch.device("cpu"), form_sums, _decompose, rows, cap, NUM_FEATURES)
    return cost, clock.now
