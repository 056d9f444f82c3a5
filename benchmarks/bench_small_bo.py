r"""``--what small-bo``: closed-loop Bayesian optimisation at everyday sizes, both gprf BoTorch models against the exact
``SingleTaskGP``.

Maximises BoTorch's standard test problems (``--small-bo-problems``: the negated Branin, Hartmann-6, Ackley-10 and
Levy-20 of ``botorch.test_functions``, noise-free, on their bounds scaled to the unit cube) from a scrambled Sobol
design of ``--small-bo-init`` points, in batches of ``q`` points for each ``q`` of ``--small-bo-q``, until
``--small-bo-evaluations`` evaluations, for ``--small-bo-seeds`` paired seeds (every method of a seed starts from the
same design and draws the same quasi-random samples; the gprf models draw new features at every iteration, from a
seed of the run and the iteration, as their default ``seed=None`` does in a loop). Each iteration fits a new model with
BoTorch's ``fit_gpytorch_mll`` and optimises qLogNEI (128 quasi-random samples, pruned baseline) with ``optimize_acqf``.
Methods (``--small-bo-methods``):

* ``exact``: BoTorch's ``SingleTaskGP``;
* ``gprf``: :class:`~gprf.botorch.RandomFeatureSingleTaskGP` with ``F`` = :func:`gprf.suggest_num_features` of the
  current number of points and the dimension;
* ``gprf-plain``: BoTorch's ``SingleTaskGP`` with ``covar_module=gprf.random_features(<BoTorch's default
  covariance>, F)``, the same ``F``.

Reported per problem and ``q``: seconds per iteration (fit and acquisition; the test function's own time excluded), the
best value found after all evaluations (mean over seeds) and, for each gprf method, its paired difference to
``exact`` with a 95% t-interval over the seeds. ``--out`` (a folder, created if needed) receives ``small_bo.json``
(every trace) and one plot per problem and ``q``: the mean best value against evaluations and against modelling
seconds. ``--quick`` is a smoke run (Branin, ``q = 1``, 2 seeds, 5 + 3 evaluations, a small optimiser).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
import warnings
from pathlib import Path

import torch
from torch import Tensor

from benchmarks.acquisition_calls import log_nei
from benchmarks.bo_plot import plot_best_values
from benchmarks.options import subset_of
from gprf.cli.options import CLIError, positive_int, require_matplotlib
from gprf.cli.report import Progress, format_number, format_table

#: ``--small-bo-problems``: name -> (BoTorch test function class name, dimension).
PROBLEMS = {"branin": ("Branin", 2), "hartmann6": ("Hartmann", 6), "ackley10": ("Ackley", 10), "levy20": ("Levy", 20)}
METHODS = ("exact", "gprf", "gprf-plain")
#: ``optimize_acqf`` settings of full runs and of ``--quick``.
OPTIMIZER = {"num_restarts": 4, "raw_samples": 256, "maxiter": 100}
QUICK_OPTIMIZER = {"num_restarts": 2, "raw_samples": 32, "maxiter": 10}
QUICK = {"problems": ["branin"], "q": [1], "seeds": 2, "init": 5, "evaluations": 8}


def _positive_ints(text: str) -> list[int]:
    return [positive_int(part.strip()) for part in text.split(",")]


def add_small_bo_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("small-bo")
    group.add_argument(
        "--small-bo-problems", type=subset_of(tuple(PROBLEMS), "problem"), default=list(PROBLEMS), metavar="LIST",
        help=f"subset of {','.join(PROBLEMS)} (default: all)",
    )  # fmt: skip
    group.add_argument(
        "--small-bo-q", type=_positive_ints, default=[1, 4], metavar="Q,...", help="batch sizes (default: 1,4)"
    )
    group.add_argument(
        "--small-bo-init", type=positive_int, default=10, metavar="N", help="initial points (default: 10)"
    )
    group.add_argument(
        "--small-bo-evaluations", type=positive_int, default=200, metavar="N",
        help="evaluations per run, the initial ones included (default: 200)",
    )  # fmt: skip
    group.add_argument(
        "--small-bo-seeds", type=positive_int, default=10, metavar="S", help="paired seeds (default: 10)"
    )
    group.add_argument(
        "--small-bo-methods", type=subset_of(METHODS, "method"), default=list(METHODS), metavar="LIST",
        help=f"subset of {','.join(METHODS)} (default: all)",
    )  # fmt: skip
    group.add_argument(
        "--out", metavar="DIR", default="small_bo_results",
        help="folder for small_bo.json and the plots, created if needed (default: small_bo_results)",
    )  # fmt: skip
    group.add_argument("--quick", action="store_true", help="a smoke run: " + json.dumps(QUICK))


def check_small_bo_arguments(args: argparse.Namespace) -> None:
    """Apply ``--quick`` and fail before a long run on arguments that cannot work."""
    if args.quick:
        args.small_bo_problems, args.small_bo_q = QUICK["problems"], QUICK["q"]
        args.small_bo_seeds, args.small_bo_init = QUICK["seeds"], QUICK["init"]
        args.small_bo_evaluations = QUICK["evaluations"]
    if args.small_bo_init < 2:
        raise CLIError(f"argument --small-bo-init: needs at least 2 points, got {args.small_bo_init}")
    if args.small_bo_evaluations < args.small_bo_init + max(args.small_bo_q):
        raise CLIError(
            f"argument --small-bo-evaluations: needs at least --small-bo-init + the largest q "
            f"({args.small_bo_init + max(args.small_bo_q)}), got {args.small_bo_evaluations}"
        )
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CLIError(f"argument --out: {args.out!r} exists and is not a folder")
    require_matplotlib("--out")


def make_problem(name: str):
    """The negated BoTorch test function ``name`` (to maximise) on the unit cube (scaled to its bounds), its dimension
    and its optimal value (negated too)."""
    from botorch import test_functions

    class_name, dim = PROBLEMS[name]
    function_class = getattr(test_functions, class_name)
    problem = function_class(negate=True) if class_name == "Branin" else function_class(dim=dim, negate=True)
    problem = problem.to(torch.float64)
    lower, upper = problem.bounds

    def evaluate(unit_x: Tensor) -> Tensor:
        return problem(lower + (upper - lower) * unit_x).unsqueeze(-1)

    return evaluate, dim, problem.optimal_value


def build_model(method: str, x: Tensor, y: Tensor, seed: int):
    """The model of ``method`` on the data (``F`` by the rule for the gprf methods)."""
    from botorch.models import SingleTaskGP
    from botorch.models.utils.gpytorch_modules import get_covar_module_with_dim_scaled_prior

    import gprf
    from gprf.botorch import RandomFeatureSingleTaskGP

    if method == "exact":
        return SingleTaskGP(x, y)
    if method == "gprf":
        return RandomFeatureSingleTaskGP(x, y, num_features="auto", seed=seed)
    num_features = gprf.suggest_num_features(x.size(-2), x.size(-1))
    default_covariance = get_covar_module_with_dim_scaled_prior(ard_num_dims=x.size(-1))
    return SingleTaskGP(x, y, covar_module=gprf.random_features(default_covariance, num_features, seed=seed).to(x))


def propose(model, x: Tensor, q: int, seed: int, optimizer: dict) -> Tensor:
    """Fit ``model`` and maximise qLogNEI over the unit cube: the next ``q`` points."""
    from botorch.fit import fit_gpytorch_mll
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood

    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    acquisition = log_nei(model, x, seed)
    bounds = torch.stack([torch.zeros(x.size(-1)), torch.ones(x.size(-1))]).to(x)
    options = {"maxiter": optimizer["maxiter"], "seed": seed}
    candidates, _ = optimize_acqf(
        acquisition, bounds, q=q, num_restarts=optimizer["num_restarts"], raw_samples=optimizer["raw_samples"],
        options=options,
    )  # fmt: skip
    return candidates.detach()


def run_one(problem: str, method: str, q: int, seed: int, args: argparse.Namespace, log: Progress) -> dict:
    """One closed-loop run: evaluations, best value and cumulative modelling seconds after each iteration."""
    from botorch.utils.sampling import draw_sobol_samples

    evaluate, dim, _ = make_problem(problem)
    optimizer = QUICK_OPTIMIZER if args.quick else OPTIMIZER
    unit = torch.stack([torch.zeros(dim), torch.ones(dim)]).to(torch.float64)
    x = draw_sobol_samples(unit, n=args.small_bo_init, q=1, seed=seed).squeeze(-2)
    y = evaluate(x)
    evaluations, best, seconds = [x.size(0)], [y.max().item()], [0.0]
    torch.manual_seed(seed)
    iteration = 0
    while x.size(0) + q <= args.small_bo_evaluations:
        iteration += 1
        start = time.perf_counter()
        # One seed per iteration: a new feature draw for every model, as RandomFeatureSingleTaskGP's default
        # seed=None gives a loop (one draw for the whole run would repeat its errors at every iteration).
        step_seed = 1000 * seed + iteration
        batch = propose(build_model(method, x, y, step_seed), x, q, step_seed, optimizer)
        seconds.append(seconds[-1] + time.perf_counter() - start)
        x, y = torch.cat([x, batch]), torch.cat([y, evaluate(batch)])
        evaluations.append(x.size(0))
        best.append(y.max().item())
        if iteration % 25 == 0:
            log(f"small-bo {problem} q={q} {method} seed {seed}: {x.size(0)} evaluations, best {best[-1]:.4g}")
    log(f"small-bo {problem} q={q} {method} seed {seed}: done, best {best[-1]:.4g}, {seconds[-1]:.1f} s")
    return {"evaluations": evaluations, "best": best, "seconds": seconds}


def paired_interval(differences: list[float]) -> tuple[float, float, float]:
    """Mean of paired differences and its 95% t-interval ``(mean, low, high)`` (NaN bounds for one seed)."""
    from scipy.stats import t

    mean = statistics.mean(differences)
    if len(differences) < 2:
        return mean, math.nan, math.nan
    half = t.ppf(0.975, len(differences) - 1) * statistics.stdev(differences) / math.sqrt(len(differences))
    return mean, mean - half, mean + half


def summarize(runs: dict[str, list[dict]]) -> dict[str, dict]:
    """Per method: seconds per iteration, final best value, and the paired difference to ``exact``."""
    summary = {}
    for method, per_seed in runs.items():
        final = [run["best"][-1] for run in per_seed]
        steps = [run["seconds"][-1] / (len(run["seconds"]) - 1) for run in per_seed]
        entry = {"seconds_per_iteration": statistics.mean(steps), "best_final_mean": statistics.mean(final)}
        if method != "exact" and "exact" in runs:
            exact_final = [run["best"][-1] for run in runs["exact"]]
            mean, low, high = paired_interval([a - b for a, b in zip(final, exact_final, strict=True)])
            entry["difference_to_exact"] = {"mean": mean, "low": low, "high": high}
            entry["time_ratio_to_exact"] = entry["seconds_per_iteration"] / statistics.mean(
                run["seconds"][-1] / (len(run["seconds"]) - 1) for run in runs["exact"]
            )
        summary[method] = entry
    return summary


def plot_case(case: dict, path: Path) -> None:
    """Mean best value against evaluations and against modelling seconds, one line per method."""
    title = f"{case['problem']}, q={case['q']}, {len(next(iter(case['runs'].values())))} seeds"
    plot_best_values(case["runs"], title, path, markersize=2)


def run_small_bo(args: argparse.Namespace, log: Progress) -> dict:
    """Every problem, ``q``, method and seed; summaries, the JSON file and the plots in ``--out``."""
    try:
        from botorch.exceptions import InputDataWarning, OptimizationWarning
    except ImportError:
        raise CLIError("--what small-bo needs BoTorch: pip install 'gprf[botorch]'") from None
    from gprf.exceptions import LowRankStructureWarning

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log(f"small-bo: small_bo.json and the plots go to {out}")  # the report names every file written (stdout)
    cases = []
    # Each run seeds torch's global generator (paired seeds); the caller's state is restored afterwards.
    with warnings.catch_warnings(), torch.random.fork_rng():
        warnings.simplefilter("ignore", InputDataWarning)
        warnings.simplefilter("ignore", OptimizationWarning)
        # gprf-plain beyond F points: the dense density it warns about is part of what this benchmark measures.
        warnings.simplefilter("ignore", LowRankStructureWarning)
        for problem in args.small_bo_problems:
            for q in args.small_bo_q:
                runs = {
                    method: [run_one(problem, method, q, seed, args, log) for seed in range(args.small_bo_seeds)]
                    for method in args.small_bo_methods
                }
                case = {"problem": problem, "q": q, "runs": runs, "summary": summarize(runs)}
                case["plot"] = str(out / f"small_bo_{problem}_q{q}.png")
                plot_case(case, Path(case["plot"]))
                cases.append(case)
    result = {
        "init": args.small_bo_init,
        "evaluations": args.small_bo_evaluations,
        "seeds": args.small_bo_seeds,
        "quick": args.quick,
        "cases": cases,
        "json": str(out / "small_bo.json"),
    }
    Path(result["json"]).write_text(json.dumps(result, indent=1))
    return result


def _interval(entry: dict) -> str:
    difference = entry.get("difference_to_exact")
    if difference is None:
        return "-"
    return f"{difference['mean']:+.3g} [{difference['low']:+.3g}, {difference['high']:+.3g}]"


def render_small_bo(result: dict) -> list[str]:
    rows = []
    for case in result["cases"]:
        for method, entry in case["summary"].items():
            ratio = entry.get("time_ratio_to_exact")
            rows.append(
                [
                    f"{case['problem']} q={case['q']}",
                    method,
                    format_number(entry["seconds_per_iteration"]),
                    "-" if ratio is None else f"{ratio:.3g}",
                    format_number(entry["best_final_mean"]),
                    _interval(entry),
                ]
            )
    lines = [
        f"small-bo: qLogNEI from {result['init']} points to {result['evaluations']} evaluations, "
        f"{result['seeds']} paired seed(s){' (--quick)' if result['quick'] else ''}; "
        "gprf F by gprf.suggest_num_features",
        "",
        format_table(["problem", "method", "s/iter", "time/exact", "final best (mean)", "best - exact, 95% CI"], rows),
        "",
    ]
    lines += [f"wrote {case['plot']}" for case in result["cases"]]
    lines.append(f"wrote {result['json']}")
    return lines
