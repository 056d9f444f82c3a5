"""Bayesian optimization with BoTorch: exact GP vs random-feature GPs (qLogNEI and pathwise Thompson sampling).

Three strategies per problem, same initial design (scrambled Sobol), inputs in [0, 1]^d, maximising the
negated test function, hyperparameters refit by MLL every iteration:

* ``exact-qLogNEI``: BoTorch's ``SingleTaskGP`` (exact RBF kernel, BoTorch's default priors) + qLogNEI;
* ``rf-qLogNEI``: :class:`gprf.botorch.RandomFeatureSingleTaskGP` (orthogonal random Fourier features of the
  same RBF kernel, same priors) + qLogNEI;
* ``rf-TS``: the same model + ``PathwiseThompsonSampling`` (q independent posterior sample paths drawn with
  the kernel's own features and the weight-space update of :mod:`gprf.botorch`), optimised over the whole cube;
* ``rf-TS-TR``: the same paths maximised over candidates of a trust region around the best point
  (:class:`gprf.botorch.TrustRegion`, :func:`gprf.botorch.thompson_sample`; TuRBO's rule for its size).

Problems: Hartmann-6 (few evaluations, q = 1) and Styblinski-Tang-20 with 1000 initial points and batches of
50 (the many-evaluation regime where exact GPs slow down). Reports best value and wall-clock seconds per iteration
(fit + acquisition), averaged over seeds; ``--plot`` draws best value vs iteration and vs time.

``--timing`` measures the large-N claim instead: pathwise Thompson sampling of a batch of 100 candidates with
N = 20 000 training points and F = 512 features, against BoTorch's default pathwise route (exact kernel,
dense N x N update, whose memory S N^2 * 8 bytes is reported and measured at the N it can reach).

Usage::

    python examples/bayesian_optimization.py --out docs/_static --plot
    python examples/bayesian_optimization.py --quick
    python examples/bayesian_optimization.py --timing
    python examples/bayesian_optimization.py --problems styblinski_tang20 --methods rf-TS rf-TS-TR --seeds 3
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import torch
from _output import add_output_arguments, output_folder, write_outputs
from botorch.acquisition.logei import qLogNoisyExpectedImprovement
from botorch.acquisition.thompson_sampling import PathwiseThompsonSampling
from botorch.exceptions import InputDataWarning, OptimizationWarning
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from botorch.sampling.pathwise import draw_matheron_paths
from botorch.test_functions import Hartmann, StyblinskiTang
from botorch.utils.sampling import draw_sobol_samples
from gpytorch.mlls import ExactMarginalLogLikelihood

from gprf.botorch import RandomFeatureSingleTaskGP, TrustRegion, model_lengthscale, thompson_sample

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: benchmarks/ is not installed
from benchmarks.bench_thompson import dense_update_bytes
from benchmarks.memory import peak_memory_bytes

METHODS = ("exact-qLogNEI", "rf-qLogNEI", "rf-TS", "rf-TS-TR")


def problems(quick: bool) -> dict[str, dict]:
    if quick:
        return {"hartmann6": dict(function=Hartmann(dim=6, negate=True), n_init=10, iterations=3, q=1)}
    return {
        "hartmann6": dict(function=Hartmann(dim=6, negate=True), n_init=12, iterations=25, q=1),
        "styblinski_tang20": dict(function=StyblinskiTang(dim=20, negate=True), n_init=1000, iterations=8, q=50),
    }


def evaluate(function, x: torch.Tensor) -> torch.Tensor:
    """The test function on unit-cube inputs."""
    bounds = function.bounds.to(x)
    return function(bounds[0] + (bounds[1] - bounds[0]) * x).unsqueeze(-1)


def build_model(method: str, x: torch.Tensor, y: torch.Tensor, num_features: int, seed: int):
    if method.startswith("exact"):
        return SingleTaskGP(x, y)
    return RandomFeatureSingleTaskGP(x, y, num_features=num_features, seed=seed)


def propose(method: str, model, x: torch.Tensor, q: int, seed: int) -> torch.Tensor:
    bounds = torch.stack([torch.zeros(x.size(-1)), torch.ones(x.size(-1))]).to(x)
    if method.endswith("TS"):
        acquisition = PathwiseThompsonSampling(model)
    else:
        sampler = SobolQMCNormalSampler(torch.Size([128]), seed=seed)
        acquisition = qLogNoisyExpectedImprovement(model, X_baseline=x, sampler=sampler, prune_baseline=True)
    candidates, _ = optimize_acqf(acquisition, bounds, q=q, num_restarts=4, raw_samples=256, options={"maxiter": 100})
    return candidates.detach()


def run(problem: dict, method: str, seed: int, num_features: int) -> tuple[list[float], list[float]]:
    function = problem["function"]
    torch.manual_seed(seed)
    dim = function.dim
    x = draw_sobol_samples(
        torch.stack([torch.zeros(dim), torch.ones(dim)]).double(), n=problem["n_init"], q=1, seed=seed
    ).squeeze(-2)
    y = evaluate(function, x)
    best, seconds = [y.max().item()], [0.0]
    region = TrustRegion(dim=dim, batch_size=problem["q"])
    region.update(y)
    for iteration in range(problem["iterations"]):
        start = time.perf_counter()
        model = build_model(method, x, y, num_features, seed)
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        if method.endswith("TR"):
            if region.restart_needed:  # collapsed: a fresh region around the best point
                region = TrustRegion(dim=dim, batch_size=problem["q"], best_value=region.best_value)
            candidates = region.candidates(
                x[y.argmax()], max(2000, 100 * dim), model_lengthscale(model), seed + iteration
            )
            candidates = thompson_sample(model, candidates, problem["q"])
        else:
            candidates = propose(method, model, x, problem["q"], seed + iteration)
        seconds.append(time.perf_counter() - start)
        values = evaluate(function, candidates)
        region.update(values)
        x, y = torch.cat([x, candidates]), torch.cat([y, values])
        best.append(y.max().item())
    return best, seconds


def compare(args) -> dict:
    results = {}
    for name, problem in problems(args.quick).items():
        if args.problems and name not in args.problems:
            continue
        for method in args.methods:
            runs = []
            for seed in range(args.seeds):
                print(f"  {name} {method}: seed {seed + 1}/{args.seeds} ...", file=sys.stderr, flush=True)
                runs.append(run(problem, method, seed, args.features))
            best = torch.tensor([r[0] for r in runs]).mean(0)
            seconds = torch.tensor([r[1] for r in runs]).mean(0)
            results[name, method] = (best, seconds)
            print(
                f"{name:10s} {method:14s} best after {problem['iterations']:2d} iterations {best[-1]:9.4f}  "
                f"(initial {best[0]:9.4f})  mean s/iteration {seconds[1:].mean():6.2f}",
                flush=True,
            )
    return results


def plot(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({name for name, _ in results})
    fig, axes = plt.subplots(2, len(names), figsize=(5 * len(names), 7), squeeze=False)
    for column, name in enumerate(names):
        for method in sorted({method for key, method in results if key == name}, key=METHODS.index):
            best, seconds = results[name, method]
            axes[0, column].plot(best.numpy(), label=method)
            axes[1, column].plot(seconds.cumsum(0).numpy(), best.numpy(), label=method)
        axes[0, column].set(title=name, xlabel="iteration", ylabel="best value (negated objective)")
        axes[1, column].set(xlabel="cumulative wall-clock seconds", ylabel="best value")
        axes[0, column].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def peak_rss_gb() -> float:
    return peak_memory_bytes(torch.device("cpu")) / 2**30


def timing(args) -> None:
    """Pathwise TS with N = 20 000, F = 512, 100 candidates; BoTorch's default route at the N it can reach."""
    function = Hartmann(dim=6, negate=True)
    generator = torch.Generator().manual_seed(0)
    num_paths = 100
    x = torch.rand(args.timing_n, 6, generator=generator, dtype=torch.float64)
    y = evaluate(function, x) + 0.01 * torch.randn(args.timing_n, 1, generator=generator, dtype=torch.float64)
    bounds = torch.stack([torch.zeros(6), torch.ones(6)]).double()

    model = RandomFeatureSingleTaskGP(x, y, num_features=512, seed=0)
    start = time.perf_counter()
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    print(f"gprf: MLL fit at N={args.timing_n}, F=512: {time.perf_counter() - start:.2f} s")
    model.eval()
    start = time.perf_counter()
    candidates, _ = optimize_acqf(
        PathwiseThompsonSampling(model), bounds, q=num_paths, num_restarts=4, raw_samples=256, options={"maxiter": 100}
    )
    gprf_seconds = time.perf_counter() - start
    print(
        f"gprf: pathwise TS, {num_paths} candidates at N={args.timing_n}, F=512: {gprf_seconds:.2f} s "
        f"(paths + optimisation), candidates {tuple(candidates.shape)}; peak RSS {peak_rss_gb():.2f} GB"
    )

    need = dense_update_bytes(args.timing_n, num_paths) / 2**30
    print(
        f"BoTorch default (exact kernel, dense update): needs >= {need:.0f} GiB for the S x N x N broadcast "
        f"at N={args.timing_n}, S={num_paths}; measured at smaller N:"
    )
    for n in args.botorch_n:
        exact = SingleTaskGP(x[:n], y[:n])
        exact.eval()
        start = time.perf_counter()
        paths = draw_matheron_paths(exact, torch.Size([num_paths]))
        paths(x[:5])
        dense_seconds = time.perf_counter() - start
        gprf_model = RandomFeatureSingleTaskGP(x[:n], y[:n], num_features=512, seed=0)
        gprf_model.eval()
        start = time.perf_counter()
        draw_matheron_paths(gprf_model, torch.Size([num_paths]))(x[:5])
        ours_seconds = time.perf_counter() - start
        print(
            f"  N={n:6d}: BoTorch default paths {dense_seconds:7.2f} s, gprf paths {ours_seconds:6.3f} s "
            f"(ratio {ours_seconds / dense_seconds:.3f}); peak RSS so far {peak_rss_gb():.2f} GB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=2, help="BO runs per problem and method, seeds 0.. (default: 2)")
    parser.add_argument(
        "--features",
        type=int,
        default=512,
        help="random features F of the rf-* models (default: 512; --timing uses 512)",
    )
    parser.add_argument("--quick", action="store_true", help="one short Hartmann run (smoke test)")
    add_output_arguments(parser, "bayesian_optimization")
    parser.add_argument("--timing", action="store_true", help="the N = 20 000 Thompson-sampling timing instead")
    parser.add_argument(
        "--timing-n", type=int, default=20_000, help="training points N of the --timing run (default: 20000)"
    )
    parser.add_argument(
        "--botorch-n",
        type=int,
        nargs="*",
        default=[1000, 2000],
        help="smaller N at which --timing measures BoTorch's dense pathwise route (default: 1000 2000)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's own choice)")
    parser.add_argument(
        "--methods", nargs="*", choices=METHODS, default=list(METHODS), help="strategies to compare (default: all four)"
    )
    parser.add_argument("--problems", nargs="*", help="hartmann6, styblinski_tang20 (default: both)")
    args = parser.parse_args()
    if args.plot and args.timing:
        parser.error("--plot draws the BO comparison; --timing has no figure")
    output = output_folder(parser, args, "bayesian_optimization") if args.plot else None
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", category=InputDataWarning)
    warnings.filterwarnings("ignore", category=OptimizationWarning)
    torch.set_default_dtype(torch.float64)
    if args.timing:
        timing(args)
        return
    results = compare(args)
    if args.plot:
        write_outputs(output, "bayesian_optimization", draw=lambda path: plot(results, path))


if __name__ == "__main__":
    main()
