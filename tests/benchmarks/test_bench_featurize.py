"""benchmarks.bench_featurize: the featurization sub-benchmark alone (float32), and its ratios' definitions."""

from __future__ import annotations

import math

import pytest

from benchmarks.bench_featurize import RATIOS, gprf_maps
from tests.benchmarks.conftest import run_json

pytestmark = pytest.mark.usefixtures("single_thread")


def test_a_single_sub_benchmark_runs_alone(tmp_path, capsys):
    text, report = run_json(tmp_path, capsys, "--what", "featurize", "--dtype", "float32")
    assert "featurize" in report and "median_s" not in report and "thompson" not in report
    assert "float32 on cpu" in text and "MLL step" not in text
    assert all(math.isfinite(t) for per in report["featurize"]["median_s"].values() for t in per.values())


def test_contenders_are_seeded_maps_of_the_requested_size():
    maps = gprf_maps(d=3, f=16, degree=2, seed=0)
    assert {a for a, _ in RATIOS} | {b for _, b in RATIOS} >= set(maps)
    for name, feature_map in maps.items():
        again = gprf_maps(d=3, f=16, degree=2, seed=0)[name]
        assert feature_map.input_dim == 3 and feature_map.num_features == 16, name
        for (_, mine), (_, other) in zip(feature_map.named_buffers(), again.named_buffers(), strict=True):
            assert mine.equal(other), name
