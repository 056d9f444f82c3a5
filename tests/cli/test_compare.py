"""End-to-end tests of ``python -m gprf compare|bench`` through the in-process ``main(argv)``.

Tiny configurations only; timings are reported but never asserted.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from gprf.cli import main
from gprf.cli.approximations import APPROXIMATIONS, Approximation, methods_for_kernel
from gprf.kernels import RandomFourierKernel

TINY_COMPARE = ["compare", "--subsample", "80", "--max-train", "120", "--fit-iters", "5", "--features", "16", "--quiet"]
TINY_BENCH = ["bench", "--n", "150", "--d", "3", "--features", "16", "--test-points", "20", "--repeats", "1",
              "--warmup", "0", "--quiet"]  # fmt: skip


def table_rows(text: str) -> dict[str, list[str]]:
    """Rows of the first table in ``text`` (between the dashed rule and the next blank line), by first cell."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("---"))
    rows = {}
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        cells = line.split()
        rows[cells[0]] = cells[1:]
    return rows


def write_csv(path, num_rows: int = 60, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_rows, 3))
    y = np.sin(x[:, 0]) + 0.5 * x[:, 1] + 0.1 * rng.normal(size=num_rows)
    lines = ["a,b,c,label,y"] + [f"{r[0]},{r[1]},{r[2]},row{i},{t}" for i, (r, t) in enumerate(zip(x, y))]
    path.write_text("\n".join(lines) + "\n")


# ------------------------------------------------------------------------------------------------ compare
def test_compare_reports_every_method_with_finite_numbers(capsys, tmp_path):
    out_json = tmp_path / "out.json"
    assert main([*TINY_COMPARE, "--methods", "rff,orf", "--json", str(out_json)]) == 0
    text = capsys.readouterr().out
    rows = table_rows(text)
    assert list(rows) == ["exact", "rff", "orf"]
    for name in ("rff", "orf"):
        features, *numbers = rows[name]
        assert features == "16"
        assert all(math.isfinite(float(value)) for value in numbers), rows[name]
    assert "KL(approx || exact)" in text and "mean over the" in text

    report = json.loads(out_json.read_text())
    assert [r["method"] for r in report["results"]] == ["exact", "rff", "orf"]
    for result in report["results"][1:]:
        for key in ("frobenius", "kl", "rmse", "nmse", "mnll", "fit_s", "predict_s"):
            assert math.isfinite(result["mean"][key]), (result["method"], key)
        assert 0 < result["mean"]["frobenius"] < 1
        assert result["mean"]["kl"] >= 0
    assert report["dataset"]["num_train"] == 120
    assert report["hyperparameters"]["fit_rows"] == 80


def test_compare_default_methods_are_every_registered_fourier_sampler(capsys):
    assert main([*TINY_COMPARE, "--max-train", "40", "--kernel", "matern52"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert list(rows) == ["exact", *methods_for_kernel("matern52")]
    assert {"rff", "orf", "sorf", "qmc"} <= set(rows)


def test_compare_repeats_are_deterministic_and_report_spread(capsys, tmp_path):
    paths = [tmp_path / "a.json", tmp_path / "b.json"]
    for path in paths:
        main([*TINY_COMPARE, "--methods", "rff", "--repeats", "2", "--seed", "3", "--json", str(path)])
    text = capsys.readouterr().out
    assert "+-" in text  # mean +- std over the two draws
    first, second = (json.loads(p.read_text())["results"][1]["draws"] for p in paths)
    assert len(first["kl"]) == 2 and first["kl"][0] != first["kl"][1]
    assert first["kl"] == second["kl"] and first["frobenius"] == second["frobenius"]


def test_compare_on_a_csv_file(capsys, tmp_path):
    data = tmp_path / "data.csv"
    write_csv(data)
    assert main([*TINY_COMPARE, "--data", str(data), "--target", "y", "--methods", "qmc"]) == 0
    captured = capsys.readouterr()
    assert "data.csv, 60 rows x 3 inputs, target 'y'" in captured.out
    assert list(table_rows(captured.out)) == ["exact", "qmc"]


def test_compare_float32_and_plot(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    plot = tmp_path / "plot.png"
    assert main([*TINY_COMPARE, "--methods", "sorf", "--dtype", "float32", "--plot", str(plot)]) == 0
    assert "float32 on cpu" in capsys.readouterr().out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_runs_a_newly_registered_approximation(capsys, monkeypatch):
    """One registry entry is all a new method needs."""
    dummy = Approximation(
        name="dummy",
        summary="test entry",
        factory=lambda req: RandomFourierKernel(
            req.num_features, req.num_dims, seed=req.seed, ard_num_dims=req.num_dims
        ),
        kernels=("rbf",),
    )
    monkeypatch.setitem(APPROXIMATIONS, "dummy", dummy)
    assert main([*TINY_COMPARE, "--methods", "dummy"]) == 0
    assert list(table_rows(capsys.readouterr().out)) == ["exact", "dummy"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--methods", "rff,nope"], "unknown method(s) 'nope'; valid methods: rff, orf, sorf, qmc"),
        (["--methods", ","], "empty list; valid methods"),
        (["--features", "15"], "need an even F"),
        (["--features", "0"], "expected a positive integer"),
        (["--kernel", "cauchy"], "invalid choice: 'cauchy'"),
        (["--test-fraction", "1"], "strictly between 0 and 1"),
        (["--data", "no/such/file.csv"], "no such file 'no/such/file.csv' (built-in datasets: diabetes)"),
        (["--target", "y"], "--target: only used with --data FILE.csv"),
        (["--device", "tpu"], "--device"),
        (["--json", "no/such/folder/out.json"], "does not exist"),
    ],
)
def test_compare_bad_arguments_give_argparse_errors(capsys, args, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "python -m gprf compare: error:" in err
    assert message in err


def test_compare_unavailable_cuda_is_a_clear_error(capsys):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(SystemExit):
        main(["compare", "--device", "cuda"])
    assert "CUDA is not available" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (None, "--data needs --target COLUMN; available columns: a, b, c, label, y"),
        ("z", "no column 'z' in"),
        ("label", "column 'label' is not numeric (line 2: 'row0')"),
    ],
)
def test_compare_csv_target_errors_name_the_columns(capsys, tmp_path, target, message):
    data = tmp_path / "data.csv"
    write_csv(data, num_rows=5)
    argv = ["compare", "--data", str(data)] + (["--target", target] if target else [])
    with pytest.raises(SystemExit):
        main(argv)
    err = capsys.readouterr().err
    assert message in err
    if target == "z":
        assert "available columns: a, b, c, label, y" in err


# ------------------------------------------------------------------------------------------------ bench
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


def test_bench_skips_the_exact_gp_above_exact_max_n(capsys):
    assert main([*TINY_BENCH, "--exact-max-n", "100"]) == 0
    text = capsys.readouterr().out
    assert "exact GP skipped: N=150 > --exact-max-n 100" in text
    assert "ratio gprf/RFFKernel" in text and "gprf/exact" not in text


def test_bench_leaves_the_global_rng_and_thread_count_alone():
    torch.manual_seed(123)
    expected = torch.rand(3)
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    assert main([*TINY_BENCH, "--exact-max-n", "0", "--threads", "1"]) == 0
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == threads


def test_bench_odd_features_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--features", "7"])
    assert exit_info.value.code == 2
    assert "python -m gprf bench: error: argument --features: must be even" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ entry point
def test_python_dash_m_gprf_help():
    result = subprocess.run([sys.executable, "-m", "gprf", "--help"], capture_output=True, text=True, check=True)
    assert "compare" in result.stdout and "bench" in result.stdout


def test_missing_command_is_an_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert "required: <command>" in capsys.readouterr().err


def test_compare_and_bench_run_on_each_device(capsys, device):
    assert main([*TINY_COMPARE, "--methods", "rff", "--device", str(device)]) == 0
    assert f"float64 on {device}" in capsys.readouterr().out
    assert main([*TINY_BENCH, "--device", str(device), "--exact-max-n", "200"]) == 0
    assert "ratio gprf/exact" in capsys.readouterr().out
