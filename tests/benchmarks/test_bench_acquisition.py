"""benchmarks.bench_acquisition: both models where the exact GP runs, gprf alone above --acq-exact-max-n, every measure
with the gradient actually flowing to the candidate points."""

from __future__ import annotations

import pytest
import torch

from benchmarks.acquisition_calls import log_nei, posterior_terms, with_points_gradient
from benchmarks.bench_acquisition import MEASURES
from tests.benchmarks.conftest import run_json

pytestmark = pytest.mark.usefixtures("single_thread")


def test_the_exact_gp_runs_only_up_to_its_size(tmp_path, capsys):
    text, report = run_json(tmp_path, capsys, "--what", "acquisition")
    sizes = report["acquisition"]["sizes"]
    assert sizes["40"]["models"] == ["gprf", "exact"] and sizes["80"]["models"] == ["gprf"]
    for size in sizes.values():
        assert set(size["median_s"]) == set(MEASURES)
        assert all(t > 0 for per in size["median_s"].values() for t in per.values())
    assert "gprf/exact" in text and "qLogNEI + grad" in text


def test_the_timed_calls_return_nonzero_gradients_with_respect_to_the_points():
    from gprf.botorch import RandomFeatureSingleTaskGP

    generator = torch.Generator().manual_seed(0)
    x = torch.rand(30, 3, generator=generator, dtype=torch.float64)
    model = RandomFeatureSingleTaskGP(x, torch.sin(5 * x).sum(-1, keepdim=True), num_features=32, seed=0).eval()
    points = torch.rand(6, 3, generator=generator, dtype=torch.float64)
    gradient = with_points_gradient(posterior_terms(model), points)()
    assert gradient.shape == points.shape and bool(gradient.abs().gt(0).all())
    batches = points.reshape(3, 2, 3)
    gradient = with_points_gradient(log_nei(model, x, seed=0), batches)()
    assert gradient.shape == batches.shape and bool(torch.isfinite(gradient).all()) and gradient.abs().sum() > 0
