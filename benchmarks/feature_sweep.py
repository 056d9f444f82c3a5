"""``python -m benchmarks.feature_sweep``: test accuracy of :func:`gprf.fit_mll` against the number of features, all
trained within one time budget.

The regression benchmark's protocol (:mod:`benchmarks.regression_data`: a seeded subsample of ``--max-n`` rows, a
seeded 90/10 split, inputs and target standardised by the training statistics), with every model started at
lengthscale 1, outputscale 1 and noise 0.1: ``ConstantMean`` + ``ScaleKernel(RandomFourierKernel(F,
sampler="orthogonal"))`` + ``GaussianLikelihood``, trained by ``gprf.fit_mll(time_budget=T, grow=...)`` for each
``F`` of ``--features`` and each seed of ``--seeds``. A seed picks the subsample, the split and the feature draw;
the draws nest (that of ``F`` is a prefix of that of ``2F``), so the rows of one seed compare feature counts on the
same data and draw.

Reported per run: the features the model kept (``grow="fit"`` keeps the largest prefix whose exact refit fits the
budget), training seconds, the first prediction's seconds right after training (``cold``: it uses the cache the fit
handed over) and the second's (``warm``), test RMSE and NLL, the learned noise; then per dataset and ``F`` the mean
and standard deviation over the seeds. Example (the numbers in the training guide)::

    python -m benchmarks.feature_sweep --data-dir ../shared/data/uci --datasets kin40k,protein \\
        --features 2048,4096,8192 --seeds 0,1,2 --time-budget 60 --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence

import gpytorch
import torch

import gprf
from benchmarks.bench_regression import even_ints
from benchmarks.regression_data import dataset_names, load_datasets, regression_split
from benchmarks.regression_methods import predictive_metrics
from gprf.cli.data import Split
from gprf.cli.models import RegressionGP
from gprf.cli.options import DTYPES, CLIError, apply_threads, positive_float, positive_int
from gprf.cli.report import format_number, format_seconds, format_table
from gprf.cli.timing import timed
from gprf.fitting.recipe import GROW_OPTIONS
from gprf.kernels import RandomFourierKernel

#: The start of every model: lengthscale, outputscale and noise variance.
START = {"lengthscale": 1.0, "outputscale": 1.0, "noise": 0.1}


def seeds(text: str) -> list[int]:
    """argparse type of a comma-separated list of seeds."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integer seeds, got {text!r}") from None
    if any(value < 0 for value in values):
        raise argparse.ArgumentTypeError(f"seeds must be non-negative, got {text!r}")
    return values


def build_model(split: Split, num_features: int, seed: int) -> RegressionGP:
    """The model of one run, at :data:`START`."""
    num_inputs = split.train_x.shape[-1]
    kernel = RandomFourierKernel(num_features, num_inputs, sampler="orthogonal", seed=seed, ard_num_dims=num_inputs)
    model = RegressionGP(split.train_x, split.train_y, kernel)
    model.covar_module.base_kernel.lengthscale = START["lengthscale"]
    model.covar_module.outputscale = START["outputscale"]
    model.likelihood.noise = START["noise"]
    return model


def _prediction(model: RegressionGP, test_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        output = model.likelihood(model(test_x))
        return output.mean, output.variance


def run_one(split: Split, num_features: int, seed: int, budget: float, grow: str) -> dict:
    """Train one model and measure it: features kept, seconds (training, cold and warm prediction), test metrics."""
    device = split.train_x.device
    model = build_model(split, num_features, seed)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    _, train_s = timed(lambda: gprf.fit_mll(mll, time_budget=budget, grow=grow, seed=seed), device)
    (mean, variance), cold_s = timed(lambda: _prediction(model, split.test_x), device)
    _, warm_s = timed(lambda: _prediction(model, split.test_x), device)
    return {
        "features": num_features,
        "kept": model.covar_module.base_kernel.num_features,
        "seed": seed,
        "train_s": train_s,
        "cold_s": cold_s,
        "warm_s": warm_s,
        **predictive_metrics(mean, variance, split.test_y),
        "noise": model.likelihood.noise.item(),
    }


def run_sweep(args: argparse.Namespace) -> dict:
    """Every dataset, feature count and seed; ``{dataset: [run, ...]}``."""
    dtype = DTYPES[args.dtype]
    device = torch.device("cpu")
    results: dict[str, list[dict]] = {}
    for data in load_datasets(args.data_dir, args.datasets):
        results[data.name] = []
        for seed in args.seeds:
            _, split = regression_split(data, args.max_n, seed, device, dtype)
            for num_features in args.features:
                record = run_one(split, num_features, seed, args.time_budget, args.grow)
                results[data.name].append(record)
                print(f"[feature_sweep] {data.name} {_row(record)}", file=sys.stderr, flush=True)
    return results


def _row(record: dict) -> str:
    return (
        f"F={record['features']} kept={record['kept']} seed={record['seed']} train {record['train_s']:.1f} s, "
        f"RMSE {record['rmse']:.4f}, NLL {record['nll']:.4f}"
    )


def _mean_sd(values: Sequence[float]) -> str:
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.4f} ± {spread:.4f}"


def render_sweep(results: dict, args: argparse.Namespace) -> list[str]:
    """One table of runs and one of means over seeds per dataset."""
    lines = [
        f"fit_mll feature sweep: time_budget={args.time_budget:g} s, grow={args.grow!r}, {args.dtype}, "
        f"{torch.get_num_threads()} thread(s), {args.max_n} rows per dataset (90/10 split), start lengthscale 1, "
        "outputscale 1, noise 0.1; RMSE and NLL per test point in standardised units"
    ]
    headers = ["F", "kept", "seed", "train_s", "cold_s", "warm_s", "RMSE", "NLL", "noise"]
    for name, records in results.items():
        rows = [
            [
                str(r["features"]),
                str(r["kept"]),
                str(r["seed"]),
                format_seconds(r["train_s"]),
                format_seconds(r["cold_s"]),
                format_seconds(r["warm_s"]),
                format_number(r["rmse"]),
                format_number(r["nll"]),
                format_number(r["noise"], 3),
            ]
            for r in records
        ]
        lines += ["", f"{name}:", "", format_table(headers, rows), ""]
        summary = []
        for num_features in dict.fromkeys(r["features"] for r in records):
            runs = [r for r in records if r["features"] == num_features]
            summary.append(
                [
                    str(num_features),
                    str(len(runs)),
                    f"{max(r['train_s'] for r in runs):.1f}",
                    _mean_sd([r["rmse"] for r in runs]),
                    _mean_sd([r["nll"] for r in runs]),
                ]
            )
        lines.append(format_table(["F", "seeds", "max train_s", "RMSE (mean ± sd)", "NLL (mean ± sd)"], summary))
    return lines


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.feature_sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", metavar="DIR", help="folder of <name>.npz/.csv datasets (default: bundled)")
    parser.add_argument("--datasets", type=dataset_names, metavar="NAMES", help="comma-separated dataset names")
    parser.add_argument("--features", type=even_ints, default=[2048, 4096, 8192], metavar="F,...")
    parser.add_argument("--seeds", type=seeds, default=[0, 1, 2], metavar="S,...")
    parser.add_argument("--time-budget", type=positive_float, default=60.0, metavar="SECONDS")
    parser.add_argument("--grow", choices=GROW_OPTIONS, default="fit", help="fit_mll's grow option (default: fit)")
    parser.add_argument("--max-n", type=positive_int, default=12000, metavar="N", help="rows per dataset")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--threads", type=positive_int, default=1, metavar="T", help="torch CPU threads (default 1)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    apply_threads(args.threads)
    begin = time.perf_counter()
    try:
        results = run_sweep(args)
    except CLIError as error:
        print(f"python -m benchmarks.feature_sweep: error: {error}", file=sys.stderr)
        return 2
    print("\n".join(render_sweep(results, args)))
    print(f"\n(sweep wall clock {time.perf_counter() - begin:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
