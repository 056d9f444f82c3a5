"""benchmarks.bench_roofline: the flop bound of a marginal-likelihood step and its multiples."""

from __future__ import annotations

import pytest

from benchmarks.bench_roofline import mll_flops, roofline_report


def test_roofline_report_divides_by_the_flop_bound():
    gemms = {"RW": {"median_s": 0.5, "flops_per_s": 4e9}, "RtR": {"median_s": 0.4, "flops_per_s": 5e9}}
    report = roofline_report(gemms, n=1000, f=100, mll_medians={"gprf": 0.03, "RFFKernel": 0.06, "exact": 1.0})
    bound = mll_flops(1000, 100) / 4e9
    assert report["bound_s"] == pytest.approx(bound)
    assert report["multiple_of_bound"] == pytest.approx({"gprf": 0.03 / bound, "RFFKernel": 0.06 / bound})


def test_mll_flops_are_three_gemms_of_n_f_squared():
    """The Gram matrix (N F^2) and its backward (2 N F^2): 3 N F^2 flops, counting a multiply-add as one flop."""
    assert mll_flops(1000, 100) == 3 * 1000 * 100**2
