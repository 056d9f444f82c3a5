"""``python -m gprf bench`` sub-benchmarks (``--what``): each runs, and reports its ratios and fields.

Tiny sizes only; timings are reported, never asserted.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from gprf.cli import main
from gprf.cli.bench import SUB_BENCHMARKS, sub_benchmarks
from gprf.cli.bench_featurize import RATIOS
from gprf.cli.bench_roofline import mll_flops, roofline_report
from gprf.cli.bench_thompson import thompson_candidates

pytestmark = pytest.mark.usefixtures("single_thread")

TINY = ["bench", "--n", "120", "--d", "3", "--features", "16", "--test-points", "20", "--repeats", "1",
        "--warmup", "0", "--exact-max-n", "0", "--featurize-n", "50", "--featurize-dims", "3,8",
        "--thompson-n", "150", "--thompson-exact-n", "60", "--paths", "7", "--candidates", "40", "--quiet"]  # fmt: skip


def run_json(tmp_path, capsys, *extra: str) -> tuple[str, dict]:
    out = tmp_path / "bench.json"
    assert main([*TINY, *extra, "--json", str(out)]) == 0
    return capsys.readouterr().out, json.loads(out.read_text())


def test_all_sub_benchmarks_report_their_ratios_and_fields(tmp_path, capsys):
    text, report = run_json(tmp_path, capsys, "--what", "all")
    assert report["config"]["what"] == list(SUB_BENCHMARKS)
    assert text.startswith("gprf bench: mll, predict, featurize, thompson; float64 on cpu, 1 thread(s), torch ")

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
    for (a, b), values in zip(RATIOS, featurize["ratios"].values()):
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
    assert "BoTorch's dense update at the large N=150 would need" in text and "ratio gprf/botorch" in text


def test_a_single_sub_benchmark_runs_alone(tmp_path, capsys):
    text, report = run_json(tmp_path, capsys, "--what", "featurize", "--dtype", "float32")
    assert "featurize" in report and "median_s" not in report and "thompson" not in report
    assert "float32 on cpu" in text and "MLL step" not in text
    assert all(math.isfinite(t) for per in report["featurize"]["median_s"].values() for t in per.values())


def test_thompson_without_the_small_exact_route(tmp_path, capsys):
    text, report = run_json(tmp_path, capsys, "--what", "thompson", "--thompson-exact-n", "0")
    assert set(report["thompson"]["median_s"]) == {"gprf-large"}
    assert "ratio gprf/botorch" not in text and "would need" in text


def test_sub_benchmarks_on_each_device(capsys, device):
    assert main([*TINY, "--what", "mll,featurize,thompson", "--device", str(device)]) == 0
    text = capsys.readouterr().out
    assert f"float64 on {device}" in text and "MLL step / bound" in text and "ratio gprf/botorch" in text
    if device.type == "cuda":
        assert "scikit-learn samplers skipped" in text and "GPU max allocated per route" in text


def test_bench_leaves_the_global_rng_alone():
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    assert main([*TINY, "--what", "thompson"]) == 0  # BoTorch's paths draw from the global RNG
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
        main(["bench", "--what", what])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "python -m gprf bench: error: argument --what" in err and message in err
    assert "choose from mll, predict, featurize, thompson" in err


def test_bad_featurize_dims_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit):
        main(["bench", "--featurize-dims", "8,0"])
    assert "argument --featurize-dims" in capsys.readouterr().err


def test_cuda_mode_without_cuda_is_a_clear_error(capsys):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(SystemExit):
        main(["bench", "--what", "featurize", "--device", "cuda"])
    assert "argument --device: CUDA is not available on this machine; use --device cpu" in capsys.readouterr().err


def test_roofline_report_divides_by_the_flop_bound():
    gemms = {"RW": {"median_s": 0.5, "flops_per_s": 4e9}, "RtR": {"median_s": 0.4, "flops_per_s": 5e9}}
    report = roofline_report(gemms, n=1000, f=100, mll_medians={"gprf": 0.03, "RFFKernel": 0.06, "exact": 1.0})
    bound = mll_flops(1000, 100) / 4e9
    assert report["bound_s"] == pytest.approx(bound)
    assert report["multiple_of_bound"] == pytest.approx({"gprf": 0.03 / bound, "RFFKernel": 0.06 / bound})


def test_thompson_candidates_are_each_paths_pick_among_the_candidates(generator):
    from gprf.botorch import RandomFeatureSingleTaskGP

    x = torch.rand(30, 2, generator=generator, dtype=torch.float64)
    y = torch.sin(6 * x).sum(-1, keepdim=True)
    candidates = torch.rand(25, 2, generator=generator, dtype=torch.float64)
    model = RandomFeatureSingleTaskGP(x, y, num_features=32, seed=0)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        picks = thompson_candidates(model, 9, candidates)
    assert picks.shape == (9, 2)
    assert all((candidates == pick).all(-1).any() for pick in picks)



def test_a_dense_update_that_cannot_fit_is_a_clear_error(capsys):
    """N = 10^6 with 100 paths needs 102 * 10^12 * 8 bytes (about 742 TiB): refused before anything runs."""
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--what", "thompson", "--thompson-exact-n", "1000000", "--quiet"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --thompson-exact-n: BoTorch's dense update at N=1000000 with 100 paths needs" in err
    assert "lower --thompson-exact-n (0 skips the exact route) or --paths" in err
