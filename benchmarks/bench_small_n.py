r"""``--what small-n``: the everyday Bayesian-optimisation sizes, gprf's two BoTorch models against the exact GP.

At each training size :math:`N` of ``--small-n`` (default 20, 100, 500, 2000) in ``--small-d`` dimensions (default 6;
Sobol points in the unit cube, the negated Hartmann-6 function at six dimensions and a sum of sines otherwise;
hyperparameters at BoTorch's initial values), three models answer the same calls:

* ``exact``: BoTorch's ``SingleTaskGP`` with its default covariance;
* ``gprf``: :class:`~gprf.botorch.RandomFeatureSingleTaskGP` with ``F`` features;
* ``gprf-plain``: BoTorch's ``SingleTaskGP`` with ``covar_module=gprf.random_features(<BoTorch's default
  covariance>, F)`` — the one-line kernel swap;

with ``F = --small-features``, or by default :func:`gprf.suggest_num_features` of :math:`N` and :math:`d`. Measures,
round-robin over the models (median seconds, then each gprf model's ratio to the exact one):

* ``fit``: one step of BoTorch's ``fit_gpytorch_mll`` — its loss closure (the negative marginal likelihood) and the
  gradient of every hyperparameter;
* ``posterior``: mean and variance at 32 batches of ``q = 4`` points, with the gradient with respect to the points;
* ``qlognei``: ``qLogNoisyExpectedImprovement`` (128 quasi-random samples, the training inputs as a pruned baseline)
  at the same batches, value and gradient;
* ``paths``: ``draw_matheron_paths`` of 16 paths, evaluated at the 128 points.

Run it on one thread (``--threads 1``): the targets of the small-data route are ratios of at most 1.2 at
:math:`N \le 500` and of at most 0.2 from :math:`N = 2000` on. ``--device cuda`` runs the three models on the GPU
(each timed call bracketed by ``torch.cuda.synchronize()``) and ``--dtype`` sets their precision (BoTorch's models
expect float64, the default); the data and candidates are drawn on the CPU in float64 and moved there.

Beside the times, the price of the approximation at those times: the root-mean-square difference between the posterior
means of ``gprf`` and ``exact`` at the 128 candidate points, in units of the targets' standard deviation (both models
at the same hyperparameters, BoTorch's initial ones). It falls like :math:`1/\sqrt F`; compare runs with
``--small-features``. The last column names the model :func:`gprf.botorch.single_task_gp` builds at each size (the
exact one while it is the cheaper).
"""

from __future__ import annotations

import argparse
import statistics
import warnings

import torch
from torch import Tensor

from benchmarks.acquisition_calls import QMC_SAMPLES, log_nei, posterior_terms, with_points_gradient
from benchmarks.timing import interleaved_timings
from gprf.cli.options import CLIError
from gprf.cli.report import Progress, format_seconds, format_table

MODELS = ("exact", "gprf", "gprf-plain")
MEASURES = {"fit": "fit step", "posterior": "posterior + grad", "qlognei": "qLogNEI + grad", "paths": "Matheron paths"}
NUM_BATCHES, BATCH_Q, NUM_PATHS = 32, 4, 16


def small_n_data(n: int, d: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """``n`` scrambled Sobol points in the unit cube, their targets (a ``n x 1`` column) and the candidate batches
    ``32 x 4 x d`` (float64)."""
    from botorch.test_functions import Hartmann
    from torch.quasirandom import SobolEngine

    x = SobolEngine(d, scramble=True, seed=seed).draw(n, dtype=torch.float64)
    y = Hartmann(dim=6, negate=True)(x) if d == 6 else torch.sin(6 * x).sum(-1)
    generator = torch.Generator().manual_seed(seed + 1)
    batches = torch.rand(NUM_BATCHES, BATCH_Q, d, generator=generator, dtype=torch.float64)
    return x, y.unsqueeze(-1), batches


def small_n_models(x: Tensor, y: Tensor, num_features: int, seed: int) -> dict[str, torch.nn.Module]:
    """The three models of the module docstring on the same data."""
    from botorch.models import SingleTaskGP
    from botorch.models.utils.gpytorch_modules import get_covar_module_with_dim_scaled_prior

    import gprf
    from gprf.botorch import RandomFeatureSingleTaskGP

    default_covariance = get_covar_module_with_dim_scaled_prior(ard_num_dims=x.size(-1))
    plain_kernel = gprf.random_features(default_covariance, num_features, seed=seed).to(x)
    return {
        "exact": SingleTaskGP(x, y),
        "gprf": RandomFeatureSingleTaskGP(x, y, num_features=num_features, seed=seed),
        "gprf-plain": SingleTaskGP(x, y, covar_module=plain_kernel),
    }


def _fit_step(model: torch.nn.Module):
    from botorch.optim.closures import get_loss_closure_with_grads
    from gpytorch.mlls import ExactMarginalLogLikelihood

    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    closure = get_loss_closure_with_grads(mll, {n: p for n, p in mll.named_parameters() if p.requires_grad})

    def run() -> Tensor:
        model.train()
        loss, _ = closure()
        return loss

    return run


def _paths(model: torch.nn.Module, points: Tensor):
    from botorch.sampling.pathwise import draw_matheron_paths

    def run() -> Tensor:
        with torch.no_grad():
            return draw_matheron_paths(model, torch.Size([NUM_PATHS]))(points)

    return run


def posterior_mean_error(model: torch.nn.Module, exact: torch.nn.Module, batches: Tensor, y: Tensor) -> float:
    """RMS difference of the two models' posterior means at the candidate points over the targets' standard
    deviation (module docstring)."""
    points = batches.reshape(-1, batches.size(-1))
    with torch.no_grad():
        difference = model.posterior(points).mean - exact.posterior(points).mean
    return (difference.square().mean().sqrt() / y.std()).item()


def run_small_n(args: argparse.Namespace, device: torch.device, dtype: torch.dtype, log: Progress) -> dict:
    """Median seconds of :data:`MEASURES` per model at every size of ``--small-n``, and the ratios to ``exact``."""
    try:
        from botorch.exceptions import InputDataWarning
    except ImportError:
        raise CLIError("--what small-n needs BoTorch: pip install 'gprf[botorch]'") from None
    import gprf
    from gprf.botorch import single_task_gp
    from gprf.exceptions import LowRankStructureWarning

    sizes = {}
    # BoTorch's Matheron paths draw from torch's global generator: the caller's state is restored afterwards.
    with warnings.catch_warnings(), torch.random.fork_rng():
        warnings.simplefilter("ignore", InputDataWarning)
        # gprf-plain beyond F points: the dense density it warns about is part of what this benchmark measures.
        warnings.simplefilter("ignore", LowRankStructureWarning)
        for n in args.small_n:
            x, y, batches = (tensor.to(device, dtype) for tensor in small_n_data(n, args.small_d, args.seed))
            num_features = args.small_features or gprf.suggest_num_features(n, args.small_d)
            models = small_n_models(x, y, num_features, args.seed)
            log(f"small-n N={n}, d={args.small_d}, F={num_features}, {device}, {str(dtype).removeprefix('torch.')}")
            fns = {}
            for name, model in models.items():
                fns[f"fit/{name}"] = _fit_step(model)
            times = interleaved_timings(fns, device, args.repeats, args.warmup)
            fns = {}
            for name, model in models.items():
                model.eval()
                fns[f"posterior/{name}"] = with_points_gradient(posterior_terms(model), batches)
                fns[f"qlognei/{name}"] = with_points_gradient(log_nei(model, x, args.seed), batches)
                fns[f"paths/{name}"] = _paths(model, batches.reshape(-1, args.small_d))
            times.update(interleaved_timings(fns, device, args.repeats, args.warmup))
            medians: dict[str, dict[str, float]] = {}
            for key, values in times.items():
                measure, name = key.split("/")
                medians.setdefault(measure, {})[name] = statistics.median(values)
            sizes[str(n)] = {
                "features": num_features,
                "median_s": medians,
                "mean_error": posterior_mean_error(models["gprf"], models["exact"], batches, y),
                "single_task_gp": type(single_task_gp(x, y)).__name__,
            }
    return {
        "d": args.small_d,
        "threads": torch.get_num_threads(),
        "device": str(device),
        "dtype": str(x.dtype).removeprefix("torch."),
        "sizes": sizes,
    }


def render_small_n(result: dict) -> list[str]:
    rows = []
    for n, size in result["sizes"].items():
        for measure, label in MEASURES.items():
            medians = size["median_s"][measure]
            exact = medians["exact"]
            rows.append(
                [
                    n,
                    str(size["features"]),
                    label,
                    format_seconds(exact),
                    format_seconds(medians["gprf"]),
                    f"{medians['gprf'] / exact:.3g}",
                    format_seconds(medians["gprf-plain"]),
                    f"{medians['gprf-plain'] / exact:.3g}",
                ]
            )
    errors = [
        [n, str(size["features"]), f"{size['mean_error']:.3g}", size["single_task_gp"]]
        for n, size in result["sizes"].items()
    ]
    return [
        f"small-n: d={result['d']}, {result['device']}, {result['dtype']}, {result['threads']} thread(s); "
        f"candidates: {NUM_BATCHES} batches of q={BATCH_Q}; "
        f"qLogNEI with {QMC_SAMPLES} QMC samples; {NUM_PATHS} Matheron paths; median seconds",
        "",
        format_table(["N", "F", "measure", "exact", "gprf", "gprf/exact", "gprf-plain", "plain/exact"], rows),
        "",
        "gprf: RandomFeatureSingleTaskGP; gprf-plain: SingleTaskGP(covar_module=gprf kernel); ratio < 1: faster. "
        "Targets: <= 1.2 for N <= 500, <= 0.2 from N = 2000 on.",
        "",
        "gprf posterior mean vs the exact GP's at the candidates (same hyperparameters): RMS difference / sd(y)",
        "",
        format_table(["N", "F", "mean error", "gprf.botorch.single_task_gp builds"], errors),
    ]
