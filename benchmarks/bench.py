"""``python -m benchmarks``: speed of gprf against its peers, measured in the same run (ratios, not absolute times).

Sub-benchmarks (``--what``, comma-separated, or ``all``; default ``mll,predict``):

* ``mll``: one marginal-likelihood step (forward + backward) of gprf's ``RandomFourierKernel`` against
  GPyTorch's ``RFFKernel`` (same ``F``) and the exact GP, plus the matmul roofline: the step as a multiple of
  ``3 N F^2`` flops at the GEMM rate measured in the same run (:mod:`benchmarks.bench_gp`,
  :mod:`benchmarks.bench_roofline`);
* ``predict``: predictive mean and variance at ``M`` test points, cold and warm caches;
* ``featurize``: structured maps (SORF, TensorSRHT; fast Walsh–Hadamard transform) against dense
  projections and scikit-learn's samplers (:mod:`benchmarks.bench_featurize`);
* ``thompson``: pathwise Thompson sampling with ``RandomFeatureSingleTaskGP`` against BoTorch's default
  route on an exact ``SingleTaskGP`` (:mod:`benchmarks.bench_thompson`);
* ``acquisition``: posterior and qLogNEI values with gradients at candidate batches, ``RandomFeatureSingleTaskGP``
  against an exact ``SingleTaskGP`` at several training sizes (:mod:`benchmarks.bench_acquisition`);
* ``bo``: Bayesian optimisation with large batches on Styblinski–Tang, gprf's Thompson sampling (global and in a
  trust region) and qLogNEI against the exact ``SingleTaskGP`` (:mod:`benchmarks.bench_bo`);
* ``small-n``: fit step, posterior, qLogNEI and Matheron paths at everyday Bayesian-optimisation sizes (20 to 2000
  points), both gprf BoTorch models against the exact ``SingleTaskGP`` (:mod:`benchmarks.bench_small_n`);
* ``small-bo``: closed-loop Bayesian optimisation with qLogNEI on BoTorch's standard problems from 10 points on, both
  gprf BoTorch models against the exact ``SingleTaskGP`` over paired seeds, with plots
  (:mod:`benchmarks.bench_small_bo`);
* ``regression``: test RMSE and NLL against training time on real data, gprf's one-call training recipe against
  the exact GP, SGPR, SVGP and GPyTorch's ``RFFKernel`` (:mod:`benchmarks.bench_regression`);
* ``composite``: relative Frobenius error and predictive KL of random features for composite kernels (products of
  stationary kernels by each product method, multi-task ICM) against the exact composite at several ``F``, with the
  fitted slope of the error against ``F`` (:mod:`benchmarks.bench_composite`).

``--device cuda`` times on the GPU (every timed call is bracketed by ``torch.cuda.synchronize()``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import torch

from benchmarks.bench_acquisition import render_acquisition, run_acquisition
from benchmarks.bench_bo import BO_METHODS, bo_methods, plot_bo, render_bo, run_bo
from benchmarks.bench_composite import render_composite, run_composite
from benchmarks.bench_featurize import render_featurize, run_featurize
from benchmarks.bench_gp import MEASURES_OF, render_gp, run_gp
from benchmarks.bench_regression import (
    add_regression_arguments,
    load_regression_datasets,
    render_regression,
    run_regression,
)
from benchmarks.bench_roofline import gemm_rates, render_roofline, roofline_report
from benchmarks.bench_small_bo import add_small_bo_arguments, check_small_bo_arguments, render_small_bo, run_small_bo
from benchmarks.bench_small_n import render_small_n, run_small_n
from benchmarks.bench_thompson import render_thompson, run_thompson
from benchmarks.bo_objectives import BO_OBJECTIVES
from gprf.cli.main import run_command
from gprf.cli.options import (
    DTYPES,
    CLIError,
    add_device_arguments,
    apply_threads,
    check_output_path,
    non_negative_int,
    positive_float,
    positive_int,
    require_matplotlib,
    resolve_device,
)
from gprf.cli.report import Progress, write_json

PROG = "python -m benchmarks"

SUB_BENCHMARKS = (
    "mll",
    "predict",
    "featurize",
    "thompson",
    "acquisition",
    "bo",
    "small-n",
    "small-bo",
    "regression",
    "composite",
)
DEFAULT_WHAT = "mll,predict"
#: Sub-benchmarks whose tables report accuracy (or closed-loop results), not round-robin timings.
ACCURACY_TABLES = {"regression", "bo", "small-bo", "composite"}


def sub_benchmarks(text: str) -> list[str]:
    """argparse type of ``--what``: a comma-separated subset of :data:`SUB_BENCHMARKS`, or ``all``."""
    names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
    if names == ["all"]:
        return list(SUB_BENCHMARKS)
    unknown = [name for name in names if name not in SUB_BENCHMARKS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"unknown sub-benchmark(s) {', '.join(map(repr, unknown)) or 'none given'}; "
            f"choose from {', '.join(SUB_BENCHMARKS)} (comma-separated) or all"
        )
    return [name for name in SUB_BENCHMARKS if name in names]  # canonical order


def positive_ints(text: str) -> list[int]:
    """argparse type of a comma-separated list of positive integers."""
    return [positive_int(part.strip()) for part in text.split(",")]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0].strip().removeprefix("``python -m benchmarks``: ")
    )
    parser.add_argument(
        "--what",
        type=sub_benchmarks,
        default=sub_benchmarks(DEFAULT_WHAT),
        metavar="LIST",
        help=f"sub-benchmarks: {', '.join(SUB_BENCHMARKS)} (comma-separated) or all (default: {DEFAULT_WHAT})",
    )
    parser.add_argument("--n", type=positive_int, default=32000, help="training points (default: 32000)")
    parser.add_argument("--d", type=positive_int, default=8, help="input dimension (default: 8)")
    parser.add_argument(
        "--features", type=positive_int, default=512, metavar="F", help="real features, even (default: 512)"
    )
    parser.add_argument("--test-points", type=positive_int, default=10000, metavar="M", help="default: 10000")
    parser.add_argument(
        "--repeats", type=positive_int, metavar="R", default=5, help="timed runs per measure (default: 5)"
    )
    parser.add_argument(
        "--warmup", type=non_negative_int, metavar="W", default=1, help="untimed runs first (default: 1)"
    )
    parser.add_argument(
        "--exact-max-n",
        type=non_negative_int,
        metavar="N",
        default=8000,
        help="time the exact GP only when N <= this (default: 8000; 0 disables it)",
    )
    parser.add_argument(
        "--seed", type=non_negative_int, metavar="S", default=0, help="seed of the data and features (default: 0)"
    )
    feat = parser.add_argument_group("featurize")
    feat.add_argument(
        "--featurize-n", type=positive_int, metavar="N", default=10000, help="inputs mapped (default: 10000)"
    )
    feat.add_argument(
        "--featurize-dims",
        type=positive_ints,
        metavar="D,...",
        default=[8, 512],
        help="input dimensions (default: 8,512: a small d and one where O(d log d) vs O(d^2) matters)",
    )
    feat.add_argument(
        "--sketch-degree",
        type=positive_int,
        metavar="P",
        default=2,
        help="polynomial degree of the sketches (default: 2)",
    )
    ts = parser.add_argument_group("thompson")
    ts.add_argument(
        "--thompson-n",
        type=positive_int,
        metavar="N",
        default=20000,
        help="training points of the gprf route (default: 20000)",
    )
    ts.add_argument(
        "--thompson-exact-n",
        type=non_negative_int,
        metavar="N",
        default=1000,
        help="training points where both routes run (default: 1000; BoTorch's dense update needs (S+2) N^2 "
        "floats; 0 skips it)",
    )
    ts.add_argument(
        "--paths", type=positive_int, metavar="S", default=100, help="sample paths = candidates selected (default: 100)"
    )
    ts.add_argument(
        "--candidates",
        type=positive_int,
        metavar="C",
        default=2000,
        help="points each path is maximised over (default: 2000)",
    )
    acq = parser.add_argument_group("acquisition")
    acq.add_argument(
        "--acq-n", type=positive_ints, default=[1000, 5000, 20000], metavar="N,...",
        help="training sizes (default: 1000,5000,20000)",
    )  # fmt: skip
    acq.add_argument(
        "--acq-exact-max-n", type=non_negative_int, default=5000, metavar="N",
        help="time the exact SingleTaskGP only when N <= this (default: 5000; 0 disables it)",
    )  # fmt: skip
    acq.add_argument("--acq-d", type=positive_int, default=20, metavar="D", help="input dimension (default: 20)")
    acq.add_argument("--acq-q", type=positive_int, default=4, metavar="Q", help="points per batch (default: 4)")
    acq.add_argument(
        "--acq-batches", type=positive_int, default=64, metavar="B", help="batches per evaluation (default: 64)"
    )
    bo = parser.add_argument_group("bo")
    bo.add_argument(
        "--bo-objective", choices=BO_OBJECTIVES, default="styblinski-tang",
        help="test problem: Styblinski-Tang, or a Matern-3/2 GP prior sample with noisy observations (the SGD-GP "
        "Thompson-sampling setting with --bo-d 8); default: styblinski-tang",
    )  # fmt: skip
    bo.add_argument(
        "--bo-noise", type=positive_float, default=1e-3, metavar="VAR",
        help="observation noise variance of gp-sample (default: 0.001)",
    )  # fmt: skip
    bo.add_argument("--bo-d", type=positive_int, default=20, metavar="D", help="dimension (default: 20)")
    bo.add_argument("--bo-init", type=positive_int, default=1000, metavar="N", help="initial points (default: 1000)")
    bo.add_argument("--bo-q", type=positive_int, default=100, metavar="Q", help="batch size (default: 100)")
    bo.add_argument(
        "--bo-max-n", type=positive_int, default=20000, metavar="N", help="evaluations per run (default: 20000)"
    )
    bo.add_argument(
        "--bo-time-budget", type=positive_float, default=600.0, metavar="SECONDS",
        help="modelling seconds per run (default: 600)",
    )  # fmt: skip
    bo.add_argument("--bo-seeds", type=positive_int, default=5, metavar="S", help="seeds (default: 5)")
    bo.add_argument(
        "--bo-methods", type=bo_methods, default=list(BO_METHODS), metavar="LIST",
        help=f"subset of {','.join(BO_METHODS)} (default: all)",
    )  # fmt: skip
    bo.add_argument("--bo-plot", metavar="OUT.png", help="draw the best value against evaluations and seconds")
    small = parser.add_argument_group("small-n")
    small.add_argument(
        "--small-n", type=positive_ints, default=[20, 100, 500, 2000], metavar="N,...",
        help="training sizes (default: 20,100,500,2000)",
    )  # fmt: skip
    small.add_argument("--small-d", type=positive_int, default=6, metavar="D", help="input dimension (default: 6)")
    small.add_argument(
        "--small-features", type=positive_int, default=None, metavar="F",
        help="features of both gprf models (default: gprf.suggest_num_features of N and D)",
    )  # fmt: skip
    add_small_bo_arguments(parser)
    composite = parser.add_argument_group("composite")
    composite.add_argument(
        "--composite-features", type=positive_ints, metavar="F,...", default=[512, 2048, 8192],
        help="numbers of features (default: 512,2048,8192)",
    )  # fmt: skip
    composite.add_argument(
        "--composite-n", type=positive_int, metavar="N", default=1000, help="training points (default: 1000)"
    )
    composite.add_argument(
        "--composite-test", type=positive_int, metavar="M", default=200, help="test points (default: 200)"
    )
    composite.add_argument(
        "--composite-draws", type=positive_int, metavar="R", default=3, help="feature draws per F (default: 3)"
    )
    add_regression_arguments(parser)
    add_device_arguments(parser)
    parser.add_argument("--json", metavar="OUT.json", help="write the results as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.set_defaults(run=run, error=parser.error)
    return parser


def config(args: argparse.Namespace, device: torch.device) -> dict:
    return {
        "what": args.what,
        "n": args.n,
        "d": args.d,
        "features": args.features,
        "rff_num_samples": args.features // 2,
        "test_points": args.test_points,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "dtype": args.dtype,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "seed": args.seed,
        "exact_max_n": args.exact_max_n,
    }


def run_bench(args: argparse.Namespace, log: Progress) -> dict:
    device = resolve_device(args.device)
    dtype = DTYPES[args.dtype]
    apply_threads(args.threads)
    check_output_path(args.json, "--json")
    if args.features % 2:
        raise CLIError(
            f"argument --features: must be even (F/2 frequencies with cos and sin features), got {args.features}"
        )
    datasets = load_regression_datasets(args)
    if "small-bo" in args.what:
        check_small_bo_arguments(args)
    if args.bo_plot is not None:
        if "bo" not in args.what:
            raise CLIError("argument --bo-plot: draws the bo benchmark; add bo to --what")
        check_output_path(args.bo_plot, "--bo-plot")
        require_matplotlib("--bo-plot")
    report: dict = {"command": "bench", "config": config(args, device)}
    measures = [measure for name in args.what if name in MEASURES_OF for measure in MEASURES_OF[name]]
    if measures:
        report.update(run_gp(args, measures, device, dtype, log))
    if "mll" in args.what:
        log("roofline: GEMMs of the benchmark's sizes")
        gemms = gemm_rates(args.n, args.features, device, dtype, args.repeats, args.warmup, args.seed)
        report["roofline"] = roofline_report(gemms, args.n, args.features, report["median_s"]["mll_step"])
    if "featurize" in args.what:
        report["featurize"] = run_featurize(
            args.featurize_n, args.featurize_dims, args.features, args.sketch_degree, args.seed,
            device, dtype, args.repeats, args.warmup, log,
        )  # fmt: skip
    if "thompson" in args.what:
        report["thompson"] = run_thompson(args, device, dtype, log)
    if "acquisition" in args.what:
        report["acquisition"] = run_acquisition(args, device, dtype, log)
    if "small-n" in args.what:
        report["small-n"] = run_small_n(args, device, dtype, log)
    if "small-bo" in args.what:
        report["small-bo"] = run_small_bo(args, log)
    if "bo" in args.what:
        report["bo"] = run_bo(args, device, log)
        if args.bo_plot:
            plot_bo(report["bo"], args.bo_plot)
            log(f"wrote {args.bo_plot}")
    if datasets is not None:
        report["regression"] = run_regression(args, datasets, device, dtype, log)
    if "composite" in args.what:  # accuracy in float64 on the CPU: the dense exact reference needs it
        report["composite"] = run_composite(
            args.composite_features, args.composite_n, args.composite_test, args.composite_draws, args.seed, log
        )
    return report


#: The report's sections that render from their own entry alone, in the order they are printed.
SECTION_RENDERERS = {
    "featurize": render_featurize,
    "thompson": render_thompson,
    "acquisition": render_acquisition,
    "bo": render_bo,
    "small-n": render_small_n,
    "small-bo": render_small_bo,
    "regression": render_regression,
    "composite": render_composite,
}


def render_report(report: dict) -> str:
    cfg = report["config"]
    lines = [
        f"gprf bench: {', '.join(cfg['what'])}; {cfg['dtype']} on {cfg['device']}, {cfg['threads']} thread(s), "
        f"torch {cfg['torch']}",
    ]
    sections = []
    if "median_s" in report:
        sections.append(render_gp(report))
    if "roofline" in report:
        sections.append(render_roofline(report["roofline"], cfg["n"], cfg["features"]))
    sections += [render(report[name]) for name, render in SECTION_RENDERERS.items() if name in report]
    for section in sections:
        lines += ["", *section]
    if set(cfg["what"]) - ACCURACY_TABLES:  # those tables report accuracy, not round-robin timings
        lines += ["", "All contenders of a table are timed round-robin in the same run: compare ratios, not times."]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    log = Progress("bench", enabled=not args.quiet)
    report = run_bench(args, log)
    print(render_report(report))
    if args.json:
        write_json(args.json, report)
        log(f"wrote {args.json}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks``; returns the exit status (bad input: status 2, an argparse error)."""
    return run_command(build_parser(), argv)
