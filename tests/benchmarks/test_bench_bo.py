"""benchmarks.bench_bo: every strategy runs its batches to the evaluation limit, best values never decrease, the
summary compares the strategies at evaluations all of them reached, and bad options are named."""

from __future__ import annotations

import pytest
import torch
from botorch.utils.sampling import draw_sobol_samples

from benchmarks.bench import main
from benchmarks.bench_bo import BO_METHODS, bo_methods
from benchmarks.bo_objectives import GPSample
from tests.benchmarks.conftest import run_json

pytestmark = pytest.mark.usefixtures("single_thread")

TINY_BO = ["--what", "bo", "--bo-d", "3", "--bo-init", "6", "--bo-q", "2", "--bo-max-n", "10", "--bo-seeds", "2"]


def test_every_strategy_runs_to_the_evaluation_limit(tmp_path, capsys):
    text, report = run_json(tmp_path, capsys, *TINY_BO, "--bo-methods", ",".join(BO_METHODS))
    result = report["bo"]
    assert set(result["runs"]) == set(BO_METHODS) and result["common_evaluations"] == 10
    for per in result["runs"].values():
        assert len(per) == 2
        for run in per:
            assert run["evaluations"] == [6, 8, 10]
            assert run["best"] == sorted(run["best"])  # the best value so far never decreases
            assert run["seconds"] == sorted(run["seconds"]) and run["seconds"][0] == 0.0
    for method, summary in result["summary"].items():
        finals = [run["best"][-1] for run in result["runs"][method]]
        assert summary["best_at_common_mean"] == pytest.approx(sum(finals) / 2)  # all reached 10 evaluations
    assert "best at 10 (mean ± sd)" in text and "round-robin" not in text


def test_the_plot_is_written(tmp_path, capsys):
    out = tmp_path / "bo.png"
    run_json(tmp_path, capsys, *TINY_BO, "--bo-methods", "gprf-ts-tr", "--bo-seeds", "1", "--bo-plot", str(out))
    assert out.stat().st_size > 0


def test_bad_options_are_named(capsys):
    with pytest.raises(Exception, match="unknown strategy"):
        bo_methods("gprf-ts,turbo")
    with pytest.raises(SystemExit):
        main(["--what", "mll", "--bo-plot", "x.png", "--quiet"])
    assert "add bo to --what" in capsys.readouterr().err


def test_the_gp_sample_problem_records_noiseless_best_values(tmp_path, capsys):
    text, report = run_json(
        tmp_path, capsys, *TINY_BO, "--bo-objective", "gp-sample", "--bo-noise", "0.01",
        "--bo-methods", "gprf-ts,gprf-ts-tr", "--bo-seeds", "1",
    )  # fmt: skip
    result = report["bo"]
    assert "Matern-3/2 GP sample in 3 dimensions" in text and "noise variance 0.01" in result["objective"]
    objective = GPSample(3, 0, noise=0.01)
    x = draw_sobol_samples(torch.stack([torch.zeros(3), torch.ones(3)]).double(), n=6, q=1, seed=0).squeeze(-2)
    for per in result["runs"].values():
        assert per[0]["best"][0] == pytest.approx(objective.value(x).max().item(), rel=1e-12)
        assert per[0]["best"] == sorted(per[0]["best"])
