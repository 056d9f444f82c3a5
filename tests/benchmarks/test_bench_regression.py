"""``python -m benchmarks --what regression`` (benchmarks.bench_regression): the whole command on a smooth function
stored as .npz and as .csv, its JSON, table and plot, and the errors for bad options and data.

A budget of one second per method and a 300-row dataset keep it short; timings are reported, never asserted.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import gprf
from benchmarks.bench import main
from benchmarks.bench_regression import contenders, even_ints, gprf_against_exact, method_names
from benchmarks.regression_methods import METHODS, Sizes
from tests.benchmarks.conftest import bench_error

pytestmark = pytest.mark.usefixtures("single_thread")
PEERS = ["exact", "sgpr", "svgp", "rff"]
TINY = ["--what", "regression", "--time-budget", "1", "--checkpoints", "2", "--inducing-points", "2000",
        "--batch-size", "64", "--rff-features", "64", "--gprf-features", "32,64", "--quiet"]  # fmt: skip
requires_recipe = pytest.mark.skipif(not hasattr(gprf, "fit_mll"), reason="gprf.fit_mll is not in this gprf")


@pytest.fixture
def data_dir(tmp_path):
    """``smooth.npz`` and ``smooth_csv.csv``: the same 300 rows of a smooth function of 3 inputs, small noise."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, size=(300, 3))
    y = np.sin(2 * x[:, 0]) + 0.5 * x[:, 1] ** 2 - x[:, 2] + 0.05 * rng.normal(size=300)
    folder = tmp_path / "data"
    folder.mkdir()
    np.savez(folder / "smooth.npz", x=x, y=y)
    rows = [",".join(repr(float(v)) for v in (*row, target)) for row, target in zip(x, y, strict=True)]
    (folder / "smooth_csv.csv").write_text("\n".join(["a,b,c,target", *rows]) + "\n")
    return folder


def test_every_method_on_every_dataset(tmp_path, capsys, data_dir):
    out, plot = tmp_path / "regression.json", tmp_path / "regression.png"
    argv = [*TINY, "--methods", ",".join(PEERS), "--data-dir", str(data_dir), "--json", str(out), "--plot", str(plot)]
    assert main(argv) == 0
    text, result = capsys.readouterr().out, json.loads(out.read_text())["regression"]
    assert result["protocol"]["rff_num_samples"] == 32 and result["protocol"]["methods"] == PEERS
    assert list(result["datasets"]) == ["smooth", "smooth_csv"]
    for name, data in result["datasets"].items():
        assert (data["train_points"], data["test_points"], data["inputs"]) == (270, 30, 3)
        assert list(data["methods"]) == PEERS
        assert data["methods"]["sgpr"]["inducing_points"] == data["methods"]["svgp"]["inducing_points"] == 270
        for label, record in data["methods"].items():
            assert math.isfinite(record["rmse"]) and math.isfinite(record["nll"]), (name, label)
            assert (
                record["steps"] >= 1 and 0.5 <= record["train_s"] and record["noise"] > 0
            )  # steps stop before the budget
            assert record["checkpoints"][-1]["rmse"] == record["rmse"]
        # predicting the training mean scores about 1 in standardised units; a smooth function is learnt
        assert 0.7 < data["baseline"]["rmse"] < 1.3
        assert data["methods"]["exact"]["rmse"] < 0.3 * data["baseline"]["rmse"]
        assert f"{name}: 270 training and 30 test points, d=3" in text
    # the same rows read from .npz and from .csv give the same split
    npz, csv = result["datasets"].values()
    assert npz["baseline"] == pytest.approx(csv["baseline"], rel=1e-12)
    assert plot.read_bytes()[:4] == b"\x89PNG"
    assert "exact" in text and "M=270,B=64" in text and "F=64" in text


@requires_recipe
def test_the_exact_starts_and_the_preconditioned_exact_route_against_the_best_exact_gp(tmp_path, capsys, data_dir):
    out = tmp_path / "regression.json"
    methods = "exact,exact-start,exact-warm,gprf,gprf-exact"
    argv = [*TINY, "--methods", methods, "--data-dir", str(data_dir), "--datasets", "smooth", "--json", str(out),
            "--preconditioner-features", "48", "--preconditioner", "random_features"]  # fmt: skip
    assert main(argv) == 0
    text, result = capsys.readouterr().out, json.loads(out.read_text())["regression"]
    assert result["protocol"]["preconditioner"] == "random_features"
    data = result["datasets"]["smooth"]
    assert list(data["methods"]) == ["exact", "exact-start", "exact-warm", "gprf-32", "gprf-64", "gprf-exact"]
    record = data["methods"]["gprf-exact"]
    assert (record["preconditioner"], record["preconditioner_features"]) == ("random_features", 48)
    assert all(r["cg_iterations"] is None for r in data["methods"].values())  # 270 rows: Cholesky solves
    verdict = data["verdict"]
    assert verdict["exact"] in ("exact", "exact-start", "exact-warm") and verdict["gprf"] in data["methods"]
    assert f"gprf's best route {verdict['gprf']}" in text and "N=270,random_features 48" in text


@requires_recipe
def test_gprf_at_each_feature_count(tmp_path, data_dir):
    out = tmp_path / "regression.json"
    argv = [*TINY, "--methods", "gprf", "--data-dir", str(data_dir), "--datasets", "smooth", "--json", str(out)]
    assert main(argv) == 0
    methods = json.loads(out.read_text())["regression"]["datasets"]["smooth"]["methods"]
    assert list(methods) == ["gprf-32", "gprf-64"]
    for features, record in zip((32, 64), methods.values(), strict=True):
        assert record["features"] == features and math.isfinite(record["nll"]) and record["rmse"] < 0.5


def test_contenders_one_gprf_run_per_feature_count():
    runs = contenders(list(METHODS), Sizes(16, 8, 64), [32, 128], num_train=100)
    assert list(runs) == [
        "exact", "exact-start", "exact-warm", "sgpr", "svgp", "rff", "gprf-32", "gprf-128", "gprf-exact",
        "gprf-exact-surrogate",
    ]  # fmt: skip
    assert runs["gprf-128"] == ("gprf", 128, {"features": 128})
    assert runs["svgp"] == ("svgp", None, {"inducing_points": 16, "batch_size": 8})
    for method in ("exact", "exact-start", "exact-warm"):
        assert runs[method] == (method, None, {"train_points": 100})
    size = {"train_points": 100, "preconditioner": "nystrom", "preconditioner_features": 1024}
    assert runs["gprf-exact"] == ("gprf-exact", None, size)
    assert runs["gprf-exact-surrogate"] == ("gprf-exact-surrogate", None, size)


def _record(method: str, rmse: float, nll: float) -> dict:
    return {"method": method, "rmse": rmse, "nll": nll}


def test_gprf_is_compared_with_the_best_exact_gp_of_the_run():
    methods = {
        "exact": _record("exact", 0.30, 0.5),
        "exact-warm": _record("exact-warm", 0.12, 0.1),
        "sgpr": _record("sgpr", 0.05, -1.0),  # neither exact nor gprf: left out
        "gprf-4096": _record("gprf", 0.11, 0.2),
        "gprf-exact": _record("gprf-exact", 0.115, 0.05),
    }
    verdict = gprf_against_exact(methods)
    # gprf-exact meets both bounds against exact-warm (the lowest exact RMSE); gprf-4096 has the lower RMSE only.
    assert verdict == {
        "exact": "exact-warm",
        "gprf": "gprf-exact",
        "rmse_ratio": pytest.approx(0.115 / 0.12),
        "nll_difference": pytest.approx(0.05 - 0.1),
        "met": True,
    }
    methods["gprf-exact"]["nll"] = 0.15
    verdict = gprf_against_exact(methods)
    assert (verdict["gprf"], verdict["met"]) == ("gprf-4096", False)  # none meets both: the lowest RMSE
    assert gprf_against_exact({"exact": methods["exact"]}) is None


def test_option_types():
    assert method_names("gprf, exact,gprf") == ["exact", "gprf"]
    assert even_ints("4096,16384") == [4096, 16384]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--data-dir", "{tmp}/nowhere"], "argument --data-dir: no such folder"),
        (["--data-dir", "{data}", "--datasets", "smooth,nope"], "argument --datasets: no file nope.npz/.csv in"),
        (["--data-dir", "{bad}"], "argument --data-dir: broken.csv: line 3 of"),
        (["--datasets", "nope"], "argument --datasets: no built-in dataset 'nope'"),
        (["--methods", "exact,gp"], "argument --methods: unknown method(s) 'gp'; choose from exact, exact-start"),
        (["--gprf-features", "64,7"], "argument --gprf-features: expected an even feature count"),
        (["--plot", "{tmp}/nowhere/p.png"], "argument --plot: folder"),
    ],
)
def test_bad_options_and_data_are_clear_errors(tmp_path, capsys, data_dir, options, message):
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "broken.csv").write_text("a,b,y\n1,2,3\n4,5\n")
    paths = {"tmp": str(tmp_path), "data": str(data_dir), "bad": str(bad)}
    with pytest.raises(SystemExit) as exit_info:
        main([*TINY, *(option.format(**paths) for option in options)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "python -m benchmarks: error:" in err and message in err


def test_plot_without_the_regression_benchmark_is_a_clear_error(capsys):
    with pytest.raises(SystemExit):
        main(["--what", "featurize", "--plot", "p.png", "--quiet"])
    assert "argument --plot: draws the regression benchmark; add regression to --what" in capsys.readouterr().err


def _write_npz(path, **arrays) -> None:
    np.savez(path, **arrays)


def _truncated_npz(path) -> None:
    _write_npz(path, x=np.ones((30, 2)), y=np.arange(30.0))
    path.write_bytes(path.read_bytes()[:-40])


# A data folder holding one bad .npz file, and the error fragment.
BAD_NPZ_FILES = [
    (lambda path: _write_npz(path, x=np.ones((30, 2)) + 1j, y=np.arange(30.0)), "array 'x' has dtype complex"),
    (lambda path: _write_npz(path, x=np.ones((30, 2)), y=np.array(["a"] * 30)), "array 'y' has dtype <U1"),
    (lambda path: _write_npz(path, x=np.ones((30, 0)), y=np.arange(30.0)), "shape (30, 0): no input columns"),
    (_truncated_npz, "cannot read d.npz as an .npz file"),
    (lambda path: path.write_bytes(b""), "cannot read d.npz as an .npz file"),
]


@pytest.mark.parametrize(("write", "message"), BAD_NPZ_FILES)
def test_bad_npz_files_are_one_line_errors(tmp_path, capsys, write, message):
    write(tmp_path / "d.npz")
    assert message in bench_error(capsys, ["--what", "regression", "--data-dir", str(tmp_path), "--quiet"])
