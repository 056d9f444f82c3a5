"""benchmarks.bench_small_bo: the --quick run writes its plot and JSON to --out and says so on stdout, methods start
from the same design (paired seeds), the paired interval is the t-interval, and bad arguments fail early."""

from __future__ import annotations

import argparse
import json
import math

import pytest
import torch

from benchmarks import bench_small_bo
from benchmarks.bench import main
from benchmarks.bench_small_bo import QUICK, build_model, make_problem, paired_interval, run_one
from tests.benchmarks.conftest import bench_error

pytestmark = pytest.mark.usefixtures("single_thread")


def test_the_quick_mode_writes_its_plot_and_json_to_out(tmp_path, capsys):
    out = tmp_path / "results"
    assert main(["--what", "small-bo", "--quick", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert f"small-bo: small_bo.json and the plots go to {out}" in captured.err  # progress
    assert "small-bo branin q=1 gprf-plain seed 1: done" in captured.err
    assert f"wrote {out / 'small_bo.json'}" in text
    assert f"wrote {out / 'small_bo_branin_q1.png'}" in text and (out / "small_bo_branin_q1.png").stat().st_size > 0
    result = json.loads((out / "small_bo.json").read_text())
    (case,) = result["cases"]
    assert (case["problem"], case["q"], result["seeds"]) == ("branin", 1, QUICK["seeds"])
    for runs in case["runs"].values():
        assert len(runs) == QUICK["seeds"]
        for run in runs:
            assert run["evaluations"] == [5, 6, 7, 8]
            assert run["best"] == sorted(run["best"])  # the best value never decreases
            assert all(b > a for a, b in zip(run["seconds"], run["seconds"][1:], strict=False))
    exact_start = [run["best"][0] for run in case["runs"]["exact"]]
    for method in ("gprf", "gprf-plain"):
        assert [run["best"][0] for run in case["runs"][method]] == exact_start  # the same initial design per seed
        assert "difference_to_exact" in case["summary"][method]
    assert "best - exact, 95% CI" in text


def test_the_paired_interval_is_the_t_interval():
    mean, low, high = paired_interval([1.0, 2.0, 3.0, 4.0])
    # t(0.975, 3) = 3.1824, sd = 1.2910, sqrt(4) = 2
    assert mean == 2.5 and high - mean == pytest.approx(3.182446 * 1.290994 / 2, rel=1e-6) and low == 2 * mean - high
    assert math.isnan(paired_interval([1.0])[1])


def test_problems_are_negated_on_the_unit_cube():
    evaluate, dim, optimum = make_problem("branin")
    # Branin's minimisers (-pi, 12.275), (pi, 2.275), (9.42478, 2.475) on [-5, 10] x [0, 15]
    unit = torch.tensor([[-math.pi, 12.275], [math.pi, 2.275]], dtype=torch.float64) - torch.tensor([-5.0, 0.0])
    unit = unit / 15.0
    # The minimisers are known to three decimals; at a minimum that moves the value by (5e-4)^2 times the curvature.
    expected = torch.full((2,), optimum, dtype=torch.float64)
    torch.testing.assert_close(evaluate(unit).squeeze(-1), expected, rtol=0, atol=1e-5)
    assert dim == 2 and optimum == pytest.approx(-0.397887, abs=1e-6)
    for name, expected in (("hartmann6", 6), ("ackley10", 10), ("levy20", 20)):
        assert make_problem(name)[1] == expected


def test_every_iteration_builds_its_model_with_a_new_seed(monkeypatch):
    seeds = []
    real = bench_small_bo.build_model

    def spy(method, x, y, seed):
        seeds.append(seed)
        return real(method, x, y, seed)

    monkeypatch.setattr(bench_small_bo, "build_model", spy)
    args = argparse.Namespace(quick=True, small_bo_init=4, small_bo_evaluations=7)
    run = run_one("branin", "gprf", 1, 2, args, lambda message: None)
    assert seeds == [2001, 2002, 2003] and run["evaluations"] == [4, 5, 6, 7]


def test_gprf_models_take_the_rules_features():
    x = torch.rand(30, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = x.sum(-1, keepdim=True)
    assert build_model("gprf", x, y, seed=0).covar_module.root_dim == 192
    assert build_model("gprf-plain", x, y, seed=0).covar_module.root_dim == 192


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--small-bo-init", "1"], "argument --small-bo-init: needs at least 2 points"),
        (["--small-bo-init", "10", "--small-bo-evaluations", "12", "--small-bo-q", "4"], "needs at least"),
        (["--small-bo-problems", "rosenbrock"], "unknown problem"),
    ],
)
def test_bad_arguments_fail_before_the_run(tmp_path, capsys, argv, message):
    assert message in bench_error(capsys, ["--what", "small-bo", "--out", str(tmp_path), *argv])


def test_run_one_is_reproducible():
    import argparse

    args = argparse.Namespace(quick=True, small_bo_init=4, small_bo_evaluations=5)
    log = lambda message: None  # noqa: E731
    first, second = (run_one("branin", "gprf", 1, 3, args, log) for _ in range(2))
    assert first["best"] == second["best"] and first["evaluations"] == [4, 5]
