r"""``--what acquisition``: acquisition values with gradients, gprf's feature model against the exact GP.

Acquisition optimisation evaluates the posterior at many candidate batches, with gradients, over and over. At each
training size :math:`N` of ``--acq-n`` (synthetic data in the unit cube, hyperparameters at BoTorch's initial
values) two models answer the same calls:

* gprf: :class:`~gprf.botorch.RandomFeatureSingleTaskGP` with ``F`` features; its posterior at :math:`M` points costs
  :math:`O(MF^2)` from the cached :math:`F\times F` factor (:class:`~gprf.prediction.FeatureSpacePredictionStrategy`);
* exact: BoTorch's ``SingleTaskGP`` (Cholesky of the :math:`N\times N` covariance, cached: :math:`O(MN)` for the
  means and :math:`O(MN^2)` for the variances), only where :math:`N \le` ``--acq-exact-max-n``.

Measures, round-robin over the models (median seconds):

* ``posterior``: mean and variance at ``--candidates`` points and their gradient with respect to the points;
* ``qlognei``: ``qLogNoisyExpectedImprovement`` (128 quasi-random samples, the training inputs as baseline, pruned
  once at construction) at ``--acq-batches`` batches of ``q = --acq-q`` points, value and gradient — one step of
  BoTorch's multi-start optimiser;
* ``setup``: building that acquisition function (posterior caches, baseline pruning), timed separately.

GPyTorch evaluates the test–train covariance block of every batch of candidates; gprf keeps its training side
deferred (:class:`~gprf.linalg.deferred_root_operator.DeferredRootLinearOperator`), since its
prediction never reads it.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import warnings

import torch
from torch import Tensor

from benchmarks.acquisition_calls import log_nei, posterior_terms, with_points_gradient
from benchmarks.bench_gp import synthetic_data
from benchmarks.timing import interleaved_timings
from gprf.cli.options import CLIError
from gprf.cli.report import Progress, format_seconds, format_table
from gprf.cli.timing import timed

MEASURES = {"setup": "qLogNEI setup", "posterior": "posterior + grad", "qlognei": "qLogNEI + grad"}


def _models(n: int, args: argparse.Namespace, x: Tensor, y: Tensor) -> dict[str, torch.nn.Module]:
    from botorch.models import SingleTaskGP

    from gprf.botorch import RandomFeatureSingleTaskGP

    models = {"gprf": RandomFeatureSingleTaskGP(x[:n], y[:n], num_features=args.features, seed=args.seed)}
    if n <= args.acq_exact_max_n:
        models["exact"] = SingleTaskGP(x[:n], y[:n])
    for model in models.values():
        model.to(x).eval()
    return models


def run_acquisition(args: argparse.Namespace, device: torch.device, dtype: torch.dtype, log: Progress) -> dict:
    """Median seconds of :data:`MEASURES` per model at every training size, and gprf/exact ratios."""
    try:
        from botorch.exceptions import InputDataWarning
    except ImportError:
        raise CLIError("--what acquisition needs BoTorch: pip install 'gprf[botorch]'") from None
    largest = max(args.acq_n)
    x, y, candidates = synthetic_data(largest, args.acq_d, args.candidates, args.seed, device, dtype)
    x, candidates, y = torch.special.ndtr(x), torch.special.ndtr(candidates), y.unsqueeze(-1)
    generator = torch.Generator().manual_seed(args.seed + 1)
    batches = torch.rand(args.acq_batches, args.acq_q, args.acq_d, generator=generator, dtype=torch.float64)
    batches = batches.to(device, dtype)
    sizes: dict[int, dict] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputDataWarning)  # float32 runs: BoTorch recommends float64
        for n in args.acq_n:
            models = _models(n, args, x, y)
            log(f"acquisition N={n}: {', '.join(models)}")
            try:
                setup = {name: [] for name in models}
                acquisitions = {}
                for _ in range(args.repeats):
                    for name, model in models.items():
                        build = functools.partial(log_nei, model, x[:n], args.seed)
                        acquisitions[name], seconds = timed(build, device)
                        setup[name].append(seconds)
                fns = {}
                for name, model in models.items():
                    fns[f"posterior/{name}"] = with_points_gradient(posterior_terms(model), candidates)
                    fns[f"qlognei/{name}"] = with_points_gradient(acquisitions[name], batches)
                times = interleaved_timings(fns, device, args.repeats, args.warmup)
            except torch.cuda.OutOfMemoryError:
                raise CLIError(f"out of GPU memory in the acquisition benchmark at N={n}; lower --acq-n") from None
            medians = {"setup": {name: statistics.median(values) for name, values in setup.items()}}
            for key, values in times.items():
                measure, name = key.split("/")
                medians.setdefault(measure, {})[name] = statistics.median(values)
            sizes[n] = {"models": list(models), "median_s": medians}
    return {
        "d": args.acq_d,
        "features": args.features,
        "candidates": args.candidates,
        "q": args.acq_q,
        "batches": args.acq_batches,
        "sizes": {str(n): size for n, size in sizes.items()},
    }


def render_acquisition(result: dict) -> list[str]:
    rows = []
    for n, size in result["sizes"].items():
        medians = size["median_s"]
        for measure, label in MEASURES.items():
            gprf, exact = medians[measure]["gprf"], medians[measure].get("exact")
            ratio = "-" if exact is None else f"{gprf / exact:.3g}"
            rows.append([n, label, format_seconds(gprf), "-" if exact is None else format_seconds(exact), ratio])
    return [
        f"acquisition: d={result['d']}, gprf F={result['features']}; posterior at {result['candidates']} points, "
        f"qLogNEI (128 QMC samples, pruned baseline) at {result['batches']} batches of q={result['q']}; "
        "median seconds, with the gradient with respect to the points",
        "",
        format_table(["N", "measure", "gprf", "exact", "gprf/exact"], rows),
        "",
        "exact: BoTorch SingleTaskGP ('-' above --acq-exact-max-n); ratio < 1: gprf is faster.",
    ]
