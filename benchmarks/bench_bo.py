r"""``--what bo``: Bayesian optimisation with large batches, gprf against the exact ``SingleTaskGP``.

Maximises ``--bo-objective`` in ``--bo-d`` dimensions (:mod:`benchmarks.bo_objectives`: the negated
Styblinski–Tang function, or a Matérn-3/2 GP prior sample observed with noise of variance ``--bo-noise``, the
large-scale Thompson-sampling setting of Lin et al. 2023) from a scrambled Sobol design of ``--bo-init`` points,
in batches of ``q = --bo-q`` points, until ``--bo-max-n`` evaluations or ``--bo-time-budget`` seconds of modelling
(fit and acquisition; the test function's own time excluded) per run, for ``--bo-seeds`` seeds. Thompson sampling
picks among ``max(2000, 100 d, 10 q)`` candidates. Strategies (``--bo-methods``):

* ``gprf-ts``: :class:`~gprf.botorch.RandomFeatureSingleTaskGP` with ``--features`` features, fitted by BoTorch's
  ``fit_gpytorch_mll`` (:func:`gprf.fit_mll` underneath), and Thompson sampling of one path per batch point over
  Sobol candidates of the whole cube (:func:`~gprf.botorch.thompson_sample`);
* ``gprf-ts-tr``: the same paths over candidates of a trust region (:class:`~gprf.botorch.TrustRegion`);
* ``gprf-qlognei``: the same model with qLogNEI, optimised by ``optimize_acqf``;
* ``exact-qlognei``: BoTorch's ``SingleTaskGP`` with ``fit_gpytorch_mll`` and qLogNEI, as far as it gets in the
  same budget.

Reported per strategy: evaluations reached, the best (noiseless) value after the evaluations every run of every strategy
reached (mean and standard deviation over seeds), the final best value, and seconds per iteration;
``--bo-plot`` draws the mean best value against evaluations and against modelling seconds.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
from torch import Tensor

from benchmarks.bo_objectives import make_objective
from benchmarks.bo_plot import plot_best_values
from benchmarks.options import subset_of
from gprf.cli.options import CLIError
from gprf.cli.report import Progress, format_number, format_table

#: ``--bo-methods`` names, in report order.
BO_METHODS = ("gprf-ts", "gprf-ts-tr", "gprf-qlognei", "exact-qlognei")


#: argparse type of ``--bo-methods``: a comma-separated subset of :data:`BO_METHODS`.
bo_methods = subset_of(BO_METHODS, "strategy")


def _fit(method: str, x: Tensor, y: Tensor, num_features: int, seed: int):
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

    from gprf.botorch import RandomFeatureSingleTaskGP

    if method.startswith("exact"):
        model = SingleTaskGP(x, y)
    else:
        model = RandomFeatureSingleTaskGP(x, y, num_features=num_features, seed=seed)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model.eval()


def _propose(method: str, model, x: Tensor, y: Tensor, q: int, region, seed: int) -> Tensor:
    from botorch.acquisition.logei import qLogNoisyExpectedImprovement
    from botorch.optim import optimize_acqf
    from botorch.sampling import SobolQMCNormalSampler
    from torch.quasirandom import SobolEngine

    from gprf.botorch import model_lengthscale, thompson_sample

    dim = x.size(-1)
    num_candidates = max(2000, 100 * dim, 10 * q)
    if method == "gprf-ts-tr":
        candidates = region.candidates(x[y.argmax()], num_candidates, model_lengthscale(model), seed)
        return thompson_sample(model, candidates, q)
    if method == "gprf-ts":
        candidates = SobolEngine(dim, scramble=True, seed=seed).draw(num_candidates, dtype=torch.float64).to(x)
        return thompson_sample(model, candidates, q)
    sampler = SobolQMCNormalSampler(torch.Size([128]), seed=seed)
    acquisition = qLogNoisyExpectedImprovement(model, X_baseline=x, sampler=sampler, prune_baseline=True)
    bounds = torch.stack([torch.zeros(dim), torch.ones(dim)]).to(x)
    candidates, _ = optimize_acqf(
        acquisition, bounds, q=q, num_restarts=2, raw_samples=128, options={"maxiter": 50}, sequential=False
    )
    return candidates.detach()


def run_one(method: str, args: argparse.Namespace, seed: int, device: torch.device, log: Progress) -> dict:
    """One optimisation run: evaluations, best value and cumulative modelling seconds after each batch."""
    from botorch.utils.sampling import draw_sobol_samples

    from gprf.botorch import TrustRegion

    dim, q = args.bo_d, args.bo_q
    objective = make_objective(args.bo_objective, dim, seed, args.bo_noise)
    unit = torch.stack([torch.zeros(dim), torch.ones(dim)]).to(device, torch.float64)
    x = draw_sobol_samples(unit, n=args.bo_init, q=1, seed=seed).squeeze(-2)
    y = objective.observe(x)
    best_value = objective.value(x).max().item()  # noiseless: what the evaluated points are worth
    region = TrustRegion(dim=dim, batch_size=q)
    region.update(y)
    evaluations, best, seconds = [x.size(0)], [best_value], [0.0]
    torch.manual_seed(seed)
    while x.size(0) + q <= args.bo_max_n and seconds[-1] < args.bo_time_budget:
        start = time.perf_counter()
        model = _fit(method, x, y, args.features, seed)
        if region.restart_needed:
            region = TrustRegion(dim=dim, batch_size=q, best_value=region.best_value)
        batch = _propose(method, model, x, y, q, region, seed + len(evaluations))
        seconds.append(seconds[-1] + time.perf_counter() - start)
        values = objective.observe(batch)
        region.update(values)
        x, y = torch.cat([x, batch]), torch.cat([y, values])
        best_value = max(best_value, objective.value(batch).max().item())
        evaluations.append(x.size(0))
        best.append(best_value)
    log(f"bo {method} seed {seed}: {evaluations[-1]} evaluations, best {best[-1]:.4g}, {seconds[-1]:.1f} s")
    return {"evaluations": evaluations, "best": best, "seconds": seconds}


def run_bo(args: argparse.Namespace, device: torch.device, log: Progress) -> dict:
    """Every strategy of ``--bo-methods`` for every seed; the per-run traces and the summaries."""
    try:
        from botorch.exceptions import InputDataWarning, OptimizationWarning
    except ImportError:
        raise CLIError("--what bo needs BoTorch: pip install 'gprf[botorch]'") from None
    if args.bo_init < 2 or args.bo_init > args.bo_max_n:
        raise CLIError(f"argument --bo-init: needs 2 <= --bo-init <= --bo-max-n ({args.bo_max_n}), got {args.bo_init}")
    runs: dict[str, list[dict]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputDataWarning)
        warnings.simplefilter("ignore", OptimizationWarning)
        for method in args.bo_methods:
            runs[method] = [run_one(method, args, seed, device, log) for seed in range(args.bo_seeds)]
    common = min(run["evaluations"][-1] for per in runs.values() for run in per)
    summary = {}
    for method, per in runs.items():
        at_common = [run["best"][max(i for i, n in enumerate(run["evaluations"]) if n <= common)] for run in per]
        steps = [
            (run["seconds"][-1] / (len(run["seconds"]) - 1)) if len(run["seconds"]) > 1 else float("nan") for run in per
        ]
        summary[method] = {
            "evaluations": statistics.mean(run["evaluations"][-1] for run in per),
            "best_at_common_mean": statistics.mean(at_common),
            "best_at_common_std": statistics.stdev(at_common) if len(at_common) > 1 else 0.0,
            "best_final_mean": statistics.mean(run["best"][-1] for run in per),
            "seconds_per_iteration": statistics.mean(steps),
        }
    return {
        "objective": make_objective(args.bo_objective, args.bo_d, 0, args.bo_noise).description,
        "dim": args.bo_d,
        "q": args.bo_q,
        "init": args.bo_init,
        "max_n": args.bo_max_n,
        "time_budget_s": args.bo_time_budget,
        "seeds": args.bo_seeds,
        "features": args.features,
        "common_evaluations": common,
        "runs": runs,
        "summary": summary,
    }


def render_bo(result: dict) -> list[str]:
    rows = []
    for method, s in result["summary"].items():
        rows.append(
            [
                method,
                format_number(s["evaluations"]),
                f"{s['best_at_common_mean']:.4g} ± {s['best_at_common_std']:.2g}",
                format_number(s["best_final_mean"]),
                format_number(s["seconds_per_iteration"]),
            ]
        )
    return [
        f"bo: {result['objective']}, {result['init']} initial points, batches of "
        f"q={result['q']}, up to {result['max_n']} evaluations or {result['time_budget_s']:g} s of modelling per run, "
        f"{result['seeds']} seed(s); gprf F={result['features']}",
        "",
        format_table(
            ["strategy", "evaluations", f"best at {result['common_evaluations']} (mean ± sd)", "final best", "s/iter"],
            rows,
        ),
    ]


def plot_bo(result: dict, path: str) -> None:
    """Mean best value against evaluations and against modelling seconds, one line per strategy."""
    plot_best_values(result["runs"], result["objective"], path, markersize=3)
