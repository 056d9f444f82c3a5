r"""Where qLogNEI sends a random-feature model at tens of points: one acquisition step, the exact GP against gprf.

The closed-loop benchmark (``python -m benchmarks --what small-bo``) reports whether a gprf model ends a Bayesian
optimisation worse than the exact ``SingleTaskGP``; this one isolates one step of that loop, with its two possible
causes separated. For each of ``--states`` seeded data sets of a BoTorch test problem (``--problem``, as the closed
loop's: negated, on the unit cube) — ``--init`` scrambled Sobol points plus ``--local`` points scattered around the
best of them (normal steps of ``--radius`` per coordinate, clipped to the cube), as a loop's data looks after a few
iterations — it fits BoTorch's ``SingleTaskGP`` with ``fit_gpytorch_mll`` and maximises qLogNEI (``q = 1``, the
closed loop's optimiser settings) with

* ``exact``: the exact GP;
* ``copied``: :class:`~gprf.botorch.RandomFeatureSingleTaskGP` with ``F`` features at the exact GP's fitted
  hyperparameters (the approximation alone);
* ``fitted``: the same model with hyperparameters fitted by ``fit_gpytorch_mll`` (approximation and fit);

for each ``F`` of ``--features``, and evaluates the test function at each proposed point. Reported: the mean value of
the proposals, their mean distance to the nearest data point (how far from the data the acquisition sends the loop),
and the root-mean-square difference between the ``copied`` and ``exact`` posterior means at points
drawn uniformly from the cube and around the best point, over the targets' standard deviation.

Far from its data an exact GP's posterior mean is its prior mean; a random-feature model's is a sum of the features'
sinusoids, which a gradient-based acquisition optimiser searching a high-dimensional cube finds the largest values of.

Run (CPU, one thread)::

    python -m benchmarks.acquisition_proposals --problem levy20 --features 640,4096 --states 12
"""

from __future__ import annotations

import argparse
import json
import statistics
import warnings
from collections.abc import Sequence

import torch
from torch import Tensor

from benchmarks.acquisition_calls import log_nei
from benchmarks.bench_small_bo import OPTIMIZER, PROBLEMS, make_problem
from gprf.cli.options import positive_float, positive_int
from gprf.cli.report import format_table

VARIANTS = ("exact", "copied", "fitted")
#: Points at which the posterior means of ``copied`` and ``exact`` are compared, per kind (uniform, local).
COMPARISON_POINTS = 1000


def loop_like_data(problem: str, init: int, local: int, radius: float, seed: int) -> tuple[Tensor, Tensor]:
    """``init`` Sobol points of the unit cube and ``local`` points around the best of them, with their values."""
    from botorch.utils.sampling import draw_sobol_samples

    evaluate, dim, _ = make_problem(problem)
    unit = torch.stack([torch.zeros(dim), torch.ones(dim)]).to(torch.float64)
    x = draw_sobol_samples(unit, n=init, q=1, seed=seed).squeeze(-2)
    generator = torch.Generator().manual_seed(seed)
    best = x[evaluate(x).argmax()]
    steps = radius * torch.randn(local, dim, generator=generator, dtype=torch.float64)
    x = torch.cat([x, (best + steps).clamp(0, 1)])
    return x, evaluate(x)


def propose_one(model, x: Tensor, seed: int) -> Tensor:
    """The maximiser of qLogNEI (``q = 1``) over the unit cube, with the closed loop's optimiser settings."""
    from botorch.optim import optimize_acqf

    bounds = torch.stack([torch.zeros(x.size(-1)), torch.ones(x.size(-1))]).to(x)
    options = {"maxiter": OPTIMIZER["maxiter"], "seed": seed}
    candidate, _ = optimize_acqf(
        log_nei(model, x, seed), bounds, q=1, num_restarts=OPTIMIZER["num_restarts"],
        raw_samples=OPTIMIZER["raw_samples"], options=options,
    )  # fmt: skip
    return candidate.detach()


def posterior_mean_gap(model, exact, x: Tensor, y: Tensor, seed: int, radius: float) -> dict[str, float]:
    """RMS difference of the posterior means over sd(y), at uniform points and at points around the best one."""
    generator = torch.Generator().manual_seed(seed + 1)
    uniform = torch.rand(COMPARISON_POINTS, x.size(-1), generator=generator, dtype=x.dtype)
    local = (x[y.argmax()] + radius * torch.randn(uniform.shape, generator=generator, dtype=x.dtype)).clamp(0, 1)
    gaps = {}
    with torch.no_grad():
        for name, points in (("uniform", uniform), ("local", local)):
            difference = model.posterior(points).mean - exact.posterior(points).mean
            gaps[name] = (difference.square().mean().sqrt() / y.std()).item()
    return gaps


def one_state(problem: str, features: Sequence[int], args: argparse.Namespace, seed: int) -> dict:
    """Every variant's proposal on one seeded data set (module docstring)."""
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

    from gprf.botorch import RandomFeatureSingleTaskGP

    evaluate, _, _ = make_problem(problem)
    x, y = loop_like_data(problem, args.init, args.local, args.radius, seed)

    def outcome(model) -> dict[str, float]:
        candidate = propose_one(model, x, seed)
        return {"value": evaluate(candidate).item(), "distance": torch.cdist(candidate, x).min().item()}

    torch.manual_seed(seed)
    exact = SingleTaskGP(x, y)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(exact.likelihood, exact))
    result = {"best": y.max().item(), "exact": outcome(exact)}
    for num_features in features:
        copied = RandomFeatureSingleTaskGP(x, y, num_features=num_features, seed=seed)
        copied.load_state_dict(exact.state_dict(), strict=False)  # the exact GP's hyperparameters; own feature draw
        copied.eval()
        fitted = RandomFeatureSingleTaskGP(x, y, num_features=num_features, seed=seed)
        fit_gpytorch_mll(ExactMarginalLogLikelihood(fitted.likelihood, fitted))
        result[f"copied/{num_features}"] = outcome(copied)
        result[f"copied/{num_features}"].update(posterior_mean_gap(copied, exact, x, y, seed, args.radius))
        result[f"fitted/{num_features}"] = outcome(fitted)
    return result


def summarize(states: list[dict], features: Sequence[int]) -> list[list[str]]:
    """One row per variant and ``F``: mean proposal value, mean distance to the data, posterior-mean gaps."""
    rows = []
    keys = ["exact"] + [f"{variant}/{f}" for f in features for variant in ("copied", "fitted")]
    for key in keys:
        entries = [state[key] for state in states]
        gap = [
            f"{statistics.mean(entry[kind] for entry in entries):.3g}" if kind in entries[0] else "-"
            for kind in ("uniform", "local")
        ]
        variant, _, num_features = key.partition("/")
        rows.append(
            [
                variant,
                num_features or "-",
                f"{statistics.mean(entry['value'] for entry in entries):.4g}",
                f"{statistics.mean(entry['distance'] for entry in entries):.3g}",
                *gap,
            ]
        )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--problem", choices=tuple(PROBLEMS), default="levy20")
    parser.add_argument("--features", default="640,4096", metavar="F,...", help="feature counts (default: 640,4096)")
    parser.add_argument("--states", type=positive_int, default=12, help="seeded data sets (default: 12)")
    parser.add_argument("--init", type=positive_int, default=10, help="Sobol points (default: 10)")
    parser.add_argument("--local", type=positive_int, default=20, help="points around the best (default: 20)")
    parser.add_argument("--radius", type=positive_float, default=0.05, help="local step per coordinate (default: 0.05)")
    parser.add_argument("--threads", type=positive_int, default=1, help="torch threads (default: 1)")
    parser.add_argument("--json", metavar="FILE", help="also write every state's outcomes to FILE")
    args = parser.parse_args(argv)
    try:
        features = [positive_int(part.strip()) for part in args.features.split(",")]
    except argparse.ArgumentTypeError as error:
        parser.error(f"argument --features: {error}")
    torch.set_num_threads(args.threads)
    from botorch.exceptions import InputDataWarning, OptimizationWarning

    from gprf.exceptions import OversizedFeaturesWarning

    states = []
    with warnings.catch_warnings(), torch.random.fork_rng():
        warnings.simplefilter("ignore", InputDataWarning)
        warnings.simplefilter("ignore", OptimizationWarning)
        warnings.simplefilter("ignore", OversizedFeaturesWarning)  # more features than the rule's: the point here
        for seed in range(args.states):
            states.append(one_state(args.problem, features, args, seed))
            print(f"state {seed}: best {states[-1]['best']:.4g}", flush=True)
    print(
        f"\n{args.problem}: qLogNEI's proposal (q=1) on {args.states} data sets of {args.init} Sobol + {args.local} "
        "local points; distance = to the nearest data point; mean gap = RMS posterior-mean difference to the exact GP "
        "/ sd(y) at the exact hyperparameters\n"
    )
    headers = ["model", "F", "proposal value (mean)", "distance (mean)", "mean gap, uniform", "mean gap, local"]
    print(format_table(headers, summarize(states, features)))
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"args": vars(args), "states": states}, file, indent=1)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
