"""benchmarks.bench_small_n: every model answers every measure at every size, F follows the rule unless given, and the
timed calls compute what they say (gradients reaching the points, paths of the right shape)."""

from __future__ import annotations

import pytest
import torch

import gprf
from benchmarks.acquisition_calls import posterior_terms, with_points_gradient
from benchmarks.bench_small_n import (
    MEASURES,
    MODELS,
    _paths,
    posterior_mean_error,
    small_n_data,
    small_n_models,
)
from tests.benchmarks.conftest import run_json

pytestmark = pytest.mark.usefixtures("single_thread")


def test_every_model_answers_every_measure_with_the_rules_features(tmp_path, capsys):
    text, report = run_json(tmp_path, capsys, "--what", "small-n")
    sizes = report["small-n"]["sizes"]
    assert set(sizes) == {"12", "24"}
    for n, size in sizes.items():
        assert size["features"] == gprf.suggest_num_features(int(n), 3) == 96
        assert set(size["median_s"]) == set(MEASURES)
        assert all(set(per) == set(MODELS) and all(t > 0 for t in per.values()) for per in size["median_s"].values())
    assert "gprf/exact" in text and "plain/exact" in text and "Matheron paths" in text
    assert "mean error" in text and all(0 < size["mean_error"] < 1 for size in sizes.values())
    assert all(size["single_task_gp"] == "SingleTaskGP" for size in sizes.values())  # 12 and 24 points: exact


def test_the_posterior_mean_error_falls_with_the_features_and_vanishes_against_itself():
    x, y, batches = small_n_data(20, 6, seed=0)
    errors = []
    for num_features in (64, 4096):
        models = small_n_models(x, y, num_features=num_features, seed=0)
        for model in models.values():
            model.eval()
        errors.append(posterior_mean_error(models["gprf"], models["exact"], batches, y))
        assert posterior_mean_error(models["exact"], models["exact"], batches, y) == 0.0
    # Monte Carlo error ~ 1/sqrt(F): 64x the features, about an eighth of the error (a factor 4 of margin).
    assert errors[1] < errors[0] / 4, errors


def test_a_given_number_of_features_is_used(tmp_path, capsys):
    _, report = run_json(tmp_path, capsys, "--what", "small-n", "--small-n", "10", "--small-features", "20")
    assert report["small-n"]["sizes"]["10"]["features"] == 20


def test_the_models_and_the_timed_calls():
    x, y, batches = small_n_data(15, 6, seed=0)
    assert x.shape == (15, 6) and y.shape == (15, 1) and batches.shape == (32, 4, 6)
    assert bool((x >= 0).all() & (x <= 1).all()) and bool((y > 0).all())  # the negated Hartmann-6 is positive there
    models = small_n_models(x, y, num_features=40, seed=0)
    assert models["gprf"].covar_module.root_dim == 40 and models["gprf-plain"].covar_module.root_dim == 40
    assert type(models["gprf-plain"]).__name__ == "SingleTaskGP"
    for model in models.values():
        model.eval()
        gradient = with_points_gradient(posterior_terms(model), batches[:3])()
        assert gradient.shape == (3, 4, 6) and gradient.abs().sum() > 0
        assert _paths(model, batches[0])().shape == (16, 4)
    assert torch.equal(small_n_data(15, 6, seed=0)[0], x)  # deterministic


def test_the_models_run_on_the_device_and_precision_asked_for(tmp_path, capsys, device):
    text, report = run_json(
        tmp_path, capsys, "--what", "small-n", "--small-n", "12", "--device", str(device), "--dtype", "float32"
    )
    result = report["small-n"]
    assert result["device"] == str(device) and result["dtype"] == "float32" and f"d=3, {device}, float32" in text
    assert 0 < result["sizes"]["12"]["mean_error"] < 1
    assert all(t > 0 for per in result["sizes"]["12"]["median_s"].values() for t in per.values())
