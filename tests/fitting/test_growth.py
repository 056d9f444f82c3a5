"""How far ``fit_mll`` grows the features within its budget, on a simulated clock: only to the largest nested prefix
whose refit fits, with a warning that gives the estimate, and within the budget; ``grow="full"`` keeps every feature
and says it will overrun."""

from __future__ import annotations

import pytest

import gprf
from gprf.fitting.growth import FeatureGrowth
from tests.fitting.conftest import (
    NUM_FEATURES,
    NUM_ROWS,
    TUNE_FEATURES,
    largest_prefix_that_fits,
    probe,
    refit_seconds,
    simulated_fit,
    simulated_mll,
)


def test_a_budget_the_full_refit_cannot_meet_keeps_thelargest_prefix_that_fits():
    time_budget = 100.0
    assert refit_seconds(NUM_FEATURES) > time_budget  # the refit at F = 512 alone would take 341 s
    mll, seen, budget_warnings = simulated_fit(time_budget, grow="fit")
    # Nothing consumes simulated time between the end of tuning and the decision: what was left then is known.
    left = time_budget - seen["tune"]
    kept = largest_prefix_that_fits(left)
    assert TUNE_FEATURES < kept < NUM_FEATURES
    assert mll.model.covar_module.base_kernel.num_features == kept
    assert len(budget_warnings) == 1
    message = str(budget_warnings[0].message)
    assert f"estimated at {refit_seconds(NUM_FEATURES):.1f} s" in message
    assert f"keep the first {kept} features" in message and f"refit estimated at {refit_seconds(kept):.1f} s" in message
    # Tuning kept half the budget less the second probe's time (up to the step that would have crossed that), the
    # refit the rest, and the prediction cache came from the refit: no Gram matrix formed after it.
    _, probe_seconds = probe()
    tuning_limit = time_budget / 2 - probe_seconds
    assert tuning_limit - seen["longest step"] < seen["last step"] <= tuning_limit
    assert seen["end"] == pytest.approx(seen["tune"] + refit_seconds(kept), rel=1e-12)
    assert seen["end"] <= time_budget


def test_grow_full_warns_with_the_estimate_and_keeps_every_feature():
    mll, seen, budget_warnings = simulated_fit(100.0, grow="full")
    assert mll.model.covar_module.base_kernel.num_features == NUM_FEATURES
    assert len(budget_warnings) == 1
    message = str(budget_warnings[0].message)
    assert f"estimated at {refit_seconds(NUM_FEATURES):.1f} s" in message
    assert "it runs anyway (grow='full')" in message
    # Tuning still kept its half of the budget; the full refit overran the rest.
    tuning_limit = 50.0 - probe()[1]
    assert tuning_limit - seen["longest step"] < seen["last step"] <= tuning_limit
    assert seen["end"] == pytest.approx(seen["tune"] + refit_seconds(NUM_FEATURES), rel=1e-12)


def test_a_budget_the_refit_meets_keeps_the_model_whole_without_a_warning():
    time_budget = 2 * refit_seconds(NUM_FEATURES) + 100.0
    mll, seen, budget_warnings = simulated_fit(time_budget, grow="fit")
    assert mll.model.covar_module.base_kernel.num_features == NUM_FEATURES and not budget_warnings
    assert seen["end"] <= time_budget


def test_grow_is_checked():
    with pytest.raises(ValueError, match="grow must be 'fit' or 'full'"):
        gprf.fit_mll(simulated_mll(), grow="some")
    with pytest.raises(TypeError, match="grow must be 'fit' or 'full'"):
        gprf.fit_mll(simulated_mll(), grow=None)


def test_the_nested_kernels_are_capped_within_the_block_and_whole_after_it():
    mll = simulated_mll()
    kernel = mll.model.covar_module.base_kernel
    growth = FeatureGrowth(mll, [kernel], TUNE_FEATURES, NUM_ROWS)
    assert growth.largest == NUM_FEATURES and growth.total(None) == NUM_FEATURES and growth.total(128) == 128
    with growth.capped(128):
        assert kernel.num_features == 128
    assert kernel.num_features == NUM_FEATURES
