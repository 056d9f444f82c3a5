"""Bayesian optimisation with a composite kernel: the exact expression against its gprf random-feature version.

Styblinski–Tang is a sum of one-dimensional functions, so an additive kernel is the model that knows its structure
(Duvenaud, Nickisch & Rasmussen 2011). The same kernel expression, written as a ``--kernel`` spec (default
``additive(rbf)``: GPyTorch's ``AdditiveStructureKernel`` of an RBF kernel over every input; products such as
``"rbf[0:10]*matern52[10:20]"`` work too), is used twice per seed from the same scrambled Sobol design:

* ``exact``: BoTorch's ``SingleTaskGP`` with ``ScaleKernel(expression)``, fitted by ``fit_gpytorch_mll``, and qLogNEI;
* ``gprf``: :class:`gprf.botorch.RandomFeatureSingleTaskGP` with ``ScaleKernel(gprf.random_features(expression,
  F))`` (per-dimension random Fourier features for the additive kernel), the same fit and qLogNEI;
* ``gprf-TS``: the gprf model with pathwise Thompson sampling in a trust region
  (:class:`gprf.botorch.TrustRegion`, :func:`gprf.botorch.thompson_sample`).

Reports the best value after the same evaluations (mean ± sd over seeds) and seconds per iteration (fit and
acquisition); ``--plot`` draws the best value against evaluations.

Usage::

    python examples/composite_bo.py --out docs/_static --plot
    python examples/composite_bo.py --kernel "rbf[0:10]*matern52[10:20]" --dim 20
    python examples/composite_bo.py --quick
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
from _output import add_output_arguments, output_folder, write_outputs
from botorch.acquisition.logei import qLogNoisyExpectedImprovement
from botorch.exceptions import InputDataWarning, OptimizationWarning
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from botorch.utils.sampling import draw_sobol_samples
from gpytorch.kernels import ScaleKernel
from gpytorch.mlls import ExactMarginalLogLikelihood

import gprf
from gprf.botorch import RandomFeatureSingleTaskGP, TrustRegion, model_lengthscale, thompson_sample
from gprf.cli.kernel_spec import parse_kernel_spec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: benchmarks/ is not installed
from benchmarks.bo_objectives import StyblinskiTang

METHODS = ("exact", "gprf", "gprf-TS")


def build_model(method: str, x: torch.Tensor, y: torch.Tensor, args, seed: int):
    expression = parse_kernel_spec(args.kernel, x.size(-1)).to(x)
    if method == "exact":
        return SingleTaskGP(x, y, covar_module=ScaleKernel(expression))
    features = gprf.random_features(expression, num_features=args.features, seed=seed)
    return RandomFeatureSingleTaskGP(x, y, covar_module=ScaleKernel(features).to(x))


def propose(method: str, model, x: torch.Tensor, y: torch.Tensor, q: int, region: TrustRegion, seed: int):
    if method == "gprf-TS":
        candidates = region.candidates(x[y.argmax()], max(2000, 100 * x.size(-1)), model_lengthscale(model), seed)
        return thompson_sample(model, candidates, q)
    sampler = SobolQMCNormalSampler(torch.Size([64]), seed=seed)
    acquisition = qLogNoisyExpectedImprovement(model, X_baseline=x, sampler=sampler, prune_baseline=True)
    bounds = torch.stack([torch.zeros(x.size(-1)), torch.ones(x.size(-1))]).to(x)
    candidates, _ = optimize_acqf(acquisition, bounds, q=q, num_restarts=4, raw_samples=256, options={"maxiter": 100})
    return candidates.detach()


def run(method: str, args, seed: int) -> dict:
    objective = StyblinskiTang(args.dim)
    unit = torch.stack([torch.zeros(args.dim), torch.ones(args.dim)]).double()
    x = draw_sobol_samples(unit, n=args.init, q=1, seed=seed).squeeze(-2)
    y = objective.observe(x)
    region = TrustRegion(dim=args.dim, batch_size=args.q)
    region.update(y)
    torch.manual_seed(seed)
    best, seconds = [y.max().item()], 0.0
    for iteration in range(args.iterations):
        start = time.perf_counter()
        model = build_model(method, x, y, args, seed)
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        if region.restart_needed:
            region = TrustRegion(dim=args.dim, batch_size=args.q, best_value=region.best_value)
        batch = propose(method, model.eval(), x, y, args.q, region, 1000 * seed + iteration)
        seconds += time.perf_counter() - start
        values = objective.observe(batch)
        region.update(values)
        x, y = torch.cat([x, batch]), torch.cat([y, values])
        best.append(y.max().item())
    print(f"  {method:8s} seed {seed}: best {best[-1]:.2f} after {x.size(0)} evaluations, {seconds:.1f} s", flush=True)
    return {"best": best, "seconds_per_iteration": seconds / args.iterations}


def plot(results: dict, args, path: str) -> None:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6, 4))
    axes = figure.subplots()
    for method, runs in results.items():
        evaluations = [args.init + args.q * i for i in range(args.iterations + 1)]
        mean = [statistics.mean(run["best"][i] for run in runs) for i in range(args.iterations + 1)]
        axes.plot(evaluations, mean, marker="o", markersize=3, label=method)
    axes.axhline(39.166166 * args.dim, color="grey", linestyle=":", label="optimum")
    axes.set(
        xlabel="evaluations", ylabel="best value (mean over seeds)", title=f"Styblinski-Tang-{args.dim}, {args.kernel}"
    )
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", default="additive(rbf)", help="kernel spec (default: additive(rbf))")
    parser.add_argument("--dim", type=int, default=20, help="input dimension d of Styblinski-Tang-d (default: 20)")
    parser.add_argument("--init", type=int, default=500, help="points of the initial Sobol design (default: 500)")
    parser.add_argument("--q", type=int, default=25, help="candidates evaluated per iteration (default: 25)")
    parser.add_argument("--iterations", type=int, default=8, help="BO iterations (batches of --q) (default: 8)")
    parser.add_argument("--seeds", type=int, default=2, help="runs per method, seeds 0.. (default: 2)")
    parser.add_argument(
        "--features", type=int, default=1024, help="random features F of the gprf models (default: 1024)"
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=METHODS,
        default=list(METHODS),
        help="strategies to compare (default: all three)",
    )
    add_output_arguments(parser, "composite_bo")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a small smoke run: --dim 20 --init 30 --q 4 --iterations 2 --seeds 1 --features 256, overriding those",
    )
    args = parser.parse_args()
    output = output_folder(parser, args, "composite_bo") if args.plot else None
    if args.quick:
        args.dim, args.init, args.q, args.iterations, args.seeds, args.features = 20, 30, 4, 2, 1, 256
    print(
        f"Styblinski-Tang-{args.dim}, kernel {args.kernel!r}, {args.init} initial points, {args.iterations} batches "
        f"of q={args.q}, {args.seeds} seed(s), gprf F={args.features}"
    )
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", (InputDataWarning, OptimizationWarning, DeprecationWarning))
        for method in args.methods:
            results[method] = [run(method, args, seed) for seed in range(args.seeds)]
    evaluations = args.init + args.q * args.iterations
    print(f"\n{'method':8s}  best after {evaluations} (mean ± sd)  s/iter")
    for method, runs in results.items():
        finals = [run["best"][-1] for run in runs]
        spread = statistics.stdev(finals) if len(finals) > 1 else 0.0
        seconds = statistics.mean(run["seconds_per_iteration"] for run in runs)
        print(f"{method:8s}  {statistics.mean(finals):10.2f} ± {spread:6.2f}        {seconds:6.2f}")
    if args.plot:
        write_outputs(output, "composite_bo", draw=lambda path: plot(results, args, path))


if __name__ == "__main__":
    main()
