"""benchmarks.bench_gp: the marginal-likelihood and prediction timings of ``bench`` against GPyTorch's RFFKernel and the
exact GP — report fields, ratios, the shared training path, and the exact GP skipped above ``--exact-max-n``."""

from __future__ import annotations

import json
import sys

from benchmarks.bench import main
from tests.benchmarks.conftest import TINY_BENCH
from tests.helpers.command_line import table_rows


def test_bench_reports_ratios_against_rffkernel_and_exact(capsys, tmp_path):
    out_json = tmp_path / "bench.json"
    assert main([*TINY_BENCH, "--exact-max-n", "200", "--json", str(out_json)]) == 0
    text = capsys.readouterr().out
    assert "MLL step (forward + backward): gprf" in text
    assert "ratio gprf/RFFKernel" in text and "ratio gprf/exact" in text
    assert "(both LowRankRootAddedDiagLinearOperator: Woodbury" in text
    rows = table_rows(text)
    assert set(rows) == {"MLL", "predict,"}  # first words of the three measures' labels

    report = json.loads(out_json.read_text())
    assert report["models"] == ["gprf", "RFFKernel", "exact"]
    assert report["same_training_path"] is True
    for measure in ("mll_step", "predict_cold", "predict_warm"):
        assert set(report["ratios"][measure]) == {"gprf/RFFKernel", "gprf/exact"}
        assert all(t > 0 for t in report["median_s"][measure].values())
    peaks = report["mll_step_peak_extra_bytes"]
    assert set(peaks) == {"gprf", "RFFKernel", "exact"}
    if sys.platform.startswith("linux"):  # the CPU peak is reset through /proc
        assert all(peak >= 0 for peak in peaks.values()) and "MLL step peak memory above" in text
    assert report["root_bytes"] == 150 * 16 * 8  # TINY_BENCH: N = 150, F = 16, float64


def test_bench_skips_the_exact_gp_above_exact_max_n(capsys):
    assert main([*TINY_BENCH, "--exact-max-n", "100"]) == 0
    text = capsys.readouterr().out
    assert "exact GP skipped: N=150 > --exact-max-n 100" in text
    assert "ratio gprf/RFFKernel" in text and "gprf/exact" not in text
