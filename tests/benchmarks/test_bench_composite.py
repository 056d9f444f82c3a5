"""benchmarks.bench_composite: the composite-kernel accuracy sub-benchmark alone, its report fields, the errors falling
with F, the fitted slopes, the naive Kronecker baseline it is measured against, and the case registry hook."""

from __future__ import annotations

import math

import pytest
import torch

from benchmarks.bench_composite import ADDITIVE_CASE_HOOK, COMPOSITE_CASES, _slope, register_case, run_composite
from gprf.kernels import FeatureProductKernel
from tests.benchmarks.conftest import run_json

pytestmark = pytest.mark.usefixtures("single_thread")


def test_a_single_sub_benchmark_runs_alone(tmp_path, capsys):
    text, report = run_json(tmp_path, capsys, "--what", "composite")
    assert "composite" in report and "median_s" not in report
    cases = report["composite"]["cases"]
    assert set(cases) == {"product", "icm", ADDITIVE_CASE_HOOK}
    assert set(cases[ADDITIVE_CASE_HOOK]) == {"per-dimension"}
    assert cases[ADDITIVE_CASE_HOOK]["per-dimension"]["root_columns"] == [40, 40]  # 2 features for each of 20 dims
    assert set(cases["product"]) == {"joint", "permutation", "kronecker-sqrt"} and set(cases["icm"]) == {"kronecker"}
    for case in cases.values():
        for rows in case.values():
            assert rows["features"] == [8, 32]
            assert all(math.isfinite(v) and v >= 0 for v in rows["frobenius"] + rows["kl"])
    assert cases["icm"]["kronecker"]["root_columns"] == [8 * 5, 32 * 5]  # F (rank 2 + 3 tasks)
    assert cases["product"]["kronecker-sqrt"]["root_columns"] == [2 * 2, 6 * 6]  # even ~sqrt(F) per factor
    assert "slope of log(error)" in text and "round-robin" not in text


def test_errors_fall_with_the_number_of_features_and_beat_the_naive_kronecker():
    report = run_composite([16, 256], n=60, test_points=20, draws=3, seed=0, log=lambda _: None)
    product = report["cases"]["product"]
    for method, rows in product.items():
        assert rows["frobenius"][1] < rows["frobenius"][0], method
        assert rows["slope_frobenius"] < 0
    # sqrt(F) features per factor: the Frobenius error falls like F^(-1/4), so the joint product wins at 256.
    assert product["joint"]["frobenius"][1] < product["kronecker-sqrt"]["frobenius"][1]


def test_slope_is_the_least_squares_fit_in_log_space():
    assert _slope([10, 100, 1000], [1.0, 0.1, 0.01]) == pytest.approx(-1.0)
    assert _slope([10], [1.0]) is None


def test_cases_register_through_the_hook():
    registered = COMPOSITE_CASES.pop(ADDITIVE_CASE_HOOK)

    @register_case(ADDITIVE_CASE_HOOK, ("tiny",), lambda n, generator: torch.rand(n, 6, generator=generator))
    def tiny(num_features, method, seed):
        return COMPOSITE_CASES["product"][1](num_features, "joint", seed)

    try:
        report = run_composite(
            [8], n=10, test_points=4, draws=1, seed=0, log=lambda _: None, cases=[ADDITIVE_CASE_HOOK]
        )
        assert set(report["cases"][ADDITIVE_CASE_HOOK]) == {"tiny"}
        assert isinstance(tiny(8, "tiny", 0)[0], FeatureProductKernel)
    finally:
        COMPOSITE_CASES[ADDITIVE_CASE_HOOK] = registered


def test_the_additive_case_falls_with_the_number_of_features():
    report = run_composite([40, 320], n=60, test_points=20, draws=2, seed=0, log=lambda _: None, cases=["additive20"])
    rows = report["cases"][ADDITIVE_CASE_HOOK]["per-dimension"]
    assert rows["root_columns"] == [40, 320] and rows["frobenius"][1] < rows["frobenius"][0]
    assert rows["kl"][1] < rows["kl"][0]
