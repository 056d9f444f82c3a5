"""``python -m benchmarks`` (benchmarks.bench and benchmarks/__main__.py): the command from the repository root,
every sub-benchmark through ``--what`` with its ratios and report fields, devices, the global RNG and thread count
left alone, and argparse errors.

Tiny sizes only; timings are reported, never asserted.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.bench import SUB_BENCHMARKS, build_parser, main, sub_benchmarks
from benchmarks.bench_featurize import RATIOS
from tests.benchmarks.conftest import TINY_BENCH, TINY_SUB_BENCH, run_json
from tests.helpers.command_line import options_without_help

pytestmark = pytest.mark.usefixtures("single_thread")
ROOT = Path(__file__).resolve().parents[2]


def test_every_option_has_help():
    assert list(options_without_help(build_parser())) == []


def test_python_dash_m_benchmarks_runs_from_the_repository_root():
    command = [sys.executable, "-m", "benchmarks", "--help"]
    result = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.startswith("usage: python -m benchmarks [-h] [--what LIST]")
    words = " ".join(result.stdout.split())  # argparse wraps the help at the terminal width
    assert (
        "sub-benchmarks: mll, predict, featurize, thompson, acquisition, bo, small-n, small-bo, regression, composite"
        in words
    )


def test_all_sub_benchmarks_report_their_ratios_and_fields(tmp_path, capsys):
    text, report = run_json(tmp_path, capsys, "--what", "all")
    assert report["config"]["what"] == list(SUB_BENCHMARKS)
    assert text.startswith(
        "gprf bench: mll, predict, featurize, thompson, acquisition, bo, small-n, small-bo, regression, composite; "
        "float64 on cpu, "
        "1 thread(s), "
        "torch "
    )

    # mll + predict: against RFFKernel (the exact GP is disabled by --exact-max-n 0)
    for measure in ("mll_step", "predict_cold", "predict_warm"):
        assert set(report["ratios"][measure]) == {"gprf/RFFKernel"}
    assert "ratio gprf/RFFKernel" in text

    # roofline: the bound is 3 N F^2 flops at the measured GEMM rate, and the multiples follow from it
    roofline = report["roofline"]
    assert roofline["mll_flops"] == 3 * 120 * 16**2
    rate = roofline["gemm"]["RW"]["flops_per_s"]
    assert rate == pytest.approx(2 * 120 * 16**2 / roofline["gemm"]["RW"]["median_s"])
    for name in ("gprf", "RFFKernel"):
        expected = report["median_s"]["mll_step"][name] / (roofline["mll_flops"] / rate)
        assert roofline["multiple_of_bound"][name] == pytest.approx(expected)
    assert "MLL step / bound: gprf" in text and "(1 = at the roofline)" in text

    # featurize: every contender at every d, every ratio (scikit-learn included on the CPU)
    featurize = report["featurize"]
    assert set(featurize["median_s"]) == {"3", "8"}
    for per in featurize["median_s"].values():
        assert len(per) == 8 and all(t > 0 for t in per.values())
    assert set(featurize["ratios"]) == {f"{a}/{b}" for a, b in RATIOS}
    for (a, b), values in zip(RATIOS, featurize["ratios"].values(), strict=True):
        for d, ratio in values.items():
            assert ratio == pytest.approx(featurize["median_s"][d][a] / featurize["median_s"][d][b])
    assert "sorf-fwht/orf-dense" in text and "srht-fwht/gaussian-sketch" in text

    # thompson: three routes, the ratio at the small N, and the dense update's memory at the large N
    thompson = report["thompson"]
    assert set(thompson["median_s"]) == {"gprf-large", "gprf-small", "botorch-small"}
    assert thompson["ratio_gprf/botorch_small"] == pytest.approx(
        thompson["median_s"]["gprf-small"] / thompson["median_s"]["botorch-small"]
    )
    assert thompson["dense_update_bytes"] == {"large_n": (7 + 2) * 150**2 * 8, "small_n": (7 + 2) * 60**2 * 8}
    assert all(peak > 0 for peak in thompson["peak_memory_bytes"].values())
    extras = thompson["peak_extra_memory_bytes"]
    assert set(extras) == set(thompson["peak_memory_bytes"])
    assert all(extra is None or 0 <= extra <= thompson["peak_memory_bytes"][name] for name, extra in extras.items())
    assert "BoTorch's dense update at the large N=150 would need" in text and "ratio gprf/botorch" in text

    # regression: the bundled dataset, subsampled, scored against the predict-the-mean baseline
    (regression,) = report["regression"]["datasets"].values()
    assert (regression["train_points"], regression["test_points"]) == (54, 6) and list(regression["methods"]) == ["rff"]
    assert "diabetes: 54 training and 6 test points, d=10 (subsampled 60 of 442 rows)" in text


def test_sub_benchmarks_on_each_device(capsys, device):
    assert main([*TINY_SUB_BENCH, "--what", "mll,featurize,thompson", "--device", str(device)]) == 0
    text = capsys.readouterr().out
    assert f"float64 on {device}" in text and "MLL step / bound" in text and "ratio gprf/botorch" in text
    if device.type == "cuda":
        assert "scikit-learn samplers skipped" in text and "GPU max allocated per route" in text


def test_bench_leaves_the_global_rng_alone():
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    assert main([*TINY_SUB_BENCH, "--what", "thompson"]) == 0  # BoTorch's paths draw from the global RNG
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("all", list(SUB_BENCHMARKS)), ("thompson, mll,mll", ["mll", "thompson"]), ("predict", ["predict"])],
)
def test_what_parses_lists_in_canonical_order(text, expected):
    assert sub_benchmarks(text) == expected


@pytest.mark.parametrize(("what", "message"), [("mll,nope", "unknown sub-benchmark(s) 'nope'"), (",", "none given")])
def test_bad_what_is_an_argparse_error(capsys, what, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["--what", what])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "python -m benchmarks: error: argument --what" in err and message in err
    assert "choose from mll, predict, featurize, thompson" in err


def test_bad_featurize_dims_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit):
        main(["--featurize-dims", "8,0"])
    assert "argument --featurize-dims" in capsys.readouterr().err


def test_cuda_mode_without_cuda_is_a_clear_error(capsys):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(SystemExit):
        main(["--what", "featurize", "--device", "cuda"])
    assert "argument --device: CUDA is not available on this machine; use --device cpu" in capsys.readouterr().err


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
        main(["--features", "7"])
    assert exit_info.value.code == 2
    assert "python -m benchmarks: error: argument --features: must be even" in capsys.readouterr().err
