"""``python -m gprf compare`` (gprf.cli.compare) end to end through the in-process ``main(argv)``: every method's
finite metrics, defaults, deterministic repeats, CSV data, float32 and plots, newly registered approximations,
``--methods`` parsing, and argparse errors. Tiny configurations only; timings are reported but never asserted."""

from __future__ import annotations

import json
import math
import warnings

import pytest
import torch

from gprf.cli import main
from gprf.cli.approximations import APPROXIMATIONS, Approximation, methods_for_kernel
from gprf.cli.compare import CompareReport, MethodResult, parse_methods, report_figure
from gprf.cli.options import CLIError
from gprf.cli.report import format_number
from gprf.exceptions import LowRankStructureWarning
from gprf.kernels import RandomFourierKernel
from tests.helpers.command_line import TINY_COMPARE, cli_error, table_rows, write_csv
from tests.helpers.figures import assert_readable, labelled_ticks


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


@pytest.mark.parametrize("kernel", ["rbf", "rbf[0:3]*matern52[3:6]+linear[6:10]"])
def test_compare_raises_no_low_rank_structure_warning(capsys, kernel):
    """Its Frobenius errors need each approximation's dense covariance (120 x 120 of rank 16 here): formed on
    purpose, not the model setup that the warning is about."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", LowRankStructureWarning)
        assert main([*TINY_COMPARE, "--kernel", kernel, "--methods", "rff,orf"]) == 0
    assert list(table_rows(capsys.readouterr().out)) == ["exact", "rff", "orf"]


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
        (["--kernel", "cauchy"], "unknown kernel 'cauchy'; use one of rbf, matern12, matern32, matern52 or a"),
        (["--kernel", "rbf[0:3]*periodic"], "a kernel name (rbf, matern12, matern32, matern52, linear, polyP"),
        (["--kernel", "rbf[0:12]"], "an end column in 1 .. 10 at position 6"),
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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # (x.x' + c)^16 on the standardised diabetes inputs reaches 1e23: its Frobenius norm overflows float32
        (["--kernel", "poly16", "--dtype", "float32"], "argument --kernel: the exact GP with --kernel poly16 is not "
         "finite in float32 on this data (its 120 x 120 kernel matrix has Frobenius norm inf"),
        (["--kernel", "poly99", "--dtype", "float32"], "the hyperparameter fit failed (NotPSDError) with --kernel "
         "poly99 in float32; try --dtype float64, a lower degree P of polyP, --optimizer adam, a smaller --lr"),
    ],
)  # fmt: skip
def test_compare_kernels_whose_values_the_dtype_cannot_hold_are_clear_errors(capsys, args, message):
    """Instead of NaN errors in the table or a NotPSDError traceback, the run stops naming --kernel and the fix."""
    assert message in cli_error(capsys, [*TINY_COMPARE, "--methods", "rff", *args])


def test_compare_composite_specs_are_approximated_part_by_part(capsys, tmp_path):
    out_json = tmp_path / "out.json"
    spec = "rbf[0:3]*matern52[3:6]+linear[6:10]"
    argv = [*TINY_COMPARE, "--kernel", spec, "--methods", "rff,qmc", "--features", "64", "--json", str(out_json)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    rows = table_rows(text)
    assert list(rows) == ["exact", "rff", "qmc"] and f"ScaleKernel({spec}, ARD)" in text
    report = json.loads(out_json.read_text())
    for result in report["results"][1:]:
        # 4 exact linear columns and 60 joint-frequency product features.
        assert result["num_features"] == 64
        assert 0 < result["mean"]["frobenius"] < 0.5 and 0 <= result["mean"]["kl"] < 1
    assert report["hyperparameters"]["lengthscale"] is None


def test_compare_composite_errors_grow_smaller_with_more_features(capsys, tmp_path):
    errors = []
    for features in (16, 256):
        path = tmp_path / f"{features}.json"
        argv = [*TINY_COMPARE, "--kernel", "rbf[0:5]*matern32[5:10]", "--methods", "rff", "--features", str(features)]
        assert main([*argv, "--repeats", "3", "--json", str(path)]) == 0
        errors.append(json.loads(path.read_text())["results"][1]["mean"]["frobenius"])
    # The relative error falls like 1/sqrt(F): 16x the features should roughly quarter it.
    assert errors[1] < errors[0] / 2, errors


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


def test_parse_methods_validates_names_kernels_and_feature_counts(monkeypatch):
    assert parse_methods(None, "rbf", 8) == methods_for_kernel("rbf")
    assert parse_methods(" qmc, rff ,qmc", "rbf", 8) == ["qmc", "rff"]
    with pytest.raises(CLIError, match="unknown method.*'x'.*valid methods: rff, orf, sorf, qmc"):
        parse_methods("rff,x", "rbf", 8)
    with pytest.raises(CLIError, match="even F"):
        parse_methods("orf", "rbf", 9)
    rbf_only = Approximation("rbfonly", "t", APPROXIMATIONS["rff"].factory, kernels=("rbf",))
    monkeypatch.setitem(APPROXIMATIONS, "rbfonly", rbf_only)
    with pytest.raises(CLIError, match="'rbfonly' cannot approximate --kernel matern12"):
        parse_methods("rbfonly", "matern12", 8)
    assert "rbfonly" not in parse_methods(None, "matern12", 8)


@pytest.mark.parametrize("repeats", [1, 3])
def test_the_plot_has_labelled_ticks_and_no_overlapping_labels(repeats):
    """Every rbf method's name (``maclaurin-srht-complex`` the longest) beside its bars, none running into another."""
    pytest.importorskip("matplotlib")
    names = methods_for_kernel("rbf")
    generator = torch.Generator().manual_seed(0)
    results = [MethodResult("exact")]
    for name in names:
        results.append(MethodResult(name, num_features=64))
        for key in ("kl", "frobenius"):
            draws = 0.05 + 0.3 * torch.rand(repeats, generator=generator, dtype=torch.float64)
            results[-1].draws[key] = draws.tolist()
    config = {"repeats": repeats, "kernel": "rbf", "features": 64}
    figure = report_figure(CompareReport(meta={"config": config, "dataset": {"name": "diabetes"}}, results=results))
    assert_readable(figure)
    bars_axes, _ = figure.axes
    assert labelled_ticks(bars_axes.yaxis) == names  # top to bottom in the report's order
    # The value labels are the means, three significant digits.
    assert [text.get_text() for text in bars_axes.texts] == [format_number(r.mean("kl"), 3) for r in results[1:]]
