"""``--what mll,predict``: GP training and prediction speed of gprf against its peers.

Three GPs with the same model (``ConstantMean``, ``ScaleKernel``, ``GaussianLikelihood``), the same
hyperparameters and the same synthetic data, measured in the same run:

* gprf: ``ScaleKernel(gprf.kernels.RandomFourierKernel(F, d))`` (feature-space prediction strategy);
* RFFKernel: ``ScaleKernel(gpytorch.kernels.RFFKernel(num_samples=F/2, num_dims=d))`` -- the same ``F``
  real features ``[cos, sin]`` (GPyTorch's ``LinearPredictionStrategy``);
* exact: ``ScaleKernel(gpytorch.kernels.RBFKernel())`` with a Cholesky factorisation, only when
  ``N <= --exact-max-n``.

Both random-feature models train through a ``LowRankRootAddedDiagLinearOperator`` (GPyTorch's, or
gprf's subclass ``FeatureRootAddedDiagLinearOperator``): Woodbury identity and matrix determinant
lemma, O(N F^2), never an N x N matrix. The report checks this and prints the operator types.
"""

from __future__ import annotations

import argparse
import math
import statistics
import textwrap
from collections.abc import Callable

import gpytorch
import torch
from gpytorch.kernels import RBFKernel, RFFKernel
from linear_operator.operators import LinearOperator, LowRankRootAddedDiagLinearOperator
from torch import Tensor

from benchmarks.memory import peak_extra_bytes
from benchmarks.timing import interleaved_timings
from gprf.cli.models import CHOLESKY_MAX_SIZE, Hyperparameters, RegressionGP, set_hyperparameters
from gprf.cli.options import CLIError
from gprf.cli.report import Progress, format_seconds, format_table
from gprf.kernels import RandomFourierKernel

PEERS = ("gprf", "RFFKernel", "exact")
MEASURES = {
    "mll_step": "MLL step (forward + backward)",
    "predict_cold": "predict, cold (builds caches)",
    "predict_warm": "predict, warm (cached)",
}
#: The measures each ``--what`` name selects.
MEASURES_OF = {"mll": ("mll_step",), "predict": ("predict_cold", "predict_warm")}


def synthetic_data(
    n: int, d: int, m: int, seed: int, device: torch.device, dtype: torch.dtype
) -> tuple[Tensor, Tensor, Tensor]:
    """Deterministic ``x ~ N(0, I_d)``, ``y = sum_j sin(2 x_j)/sqrt(d) + 0.1 eps`` and ``M`` test inputs."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=generator, dtype=torch.float64)
    y = torch.sin(2.0 * x).sum(-1) / math.sqrt(d) + 0.1 * torch.randn(n, generator=generator, dtype=torch.float64)
    test_x = torch.randn(m, d, generator=generator, dtype=torch.float64)
    return x.to(device, dtype), y.to(device, dtype), test_x.to(device, dtype)


def build_models(args: argparse.Namespace, x: Tensor, y: Tensor) -> dict[str, RegressionGP]:
    """The compared models with identical hyperparameters (``exact`` only when N is small enough)."""
    d = args.d
    kernels: dict[str, Callable[[], gpytorch.kernels.Kernel]] = {
        "gprf": lambda: RandomFourierKernel(args.features, d, seed=args.seed, ard_num_dims=d),
        "RFFKernel": lambda: RFFKernel(num_samples=args.features // 2, num_dims=d, ard_num_dims=d),
    }
    if args.n <= args.exact_max_n:
        kernels["exact"] = lambda: RBFKernel(ard_num_dims=d)
    hyper = Hyperparameters(
        mean_constant=torch.tensor(0.0),
        outputscale=torch.tensor(1.0),
        lengthscale=torch.full((1, d), math.sqrt(d) / 2),
        noise=torch.tensor([0.01]),
    )
    models = {}
    for name, make_kernel in kernels.items():
        with torch.random.fork_rng(devices=[]):  # RFFKernel draws from the global RNG: seed it, leave it as it was
            torch.manual_seed(args.seed)
            model = RegressionGP(x, y, make_kernel())
        set_hyperparameters(model, hyper)
        models[name] = model
    return models


def training_operator(model: RegressionGP) -> LinearOperator:
    """The noisy training covariance whose ``inv_quad_logdet`` the marginal likelihood calls."""
    model.train()
    with torch.no_grad():
        output = model.likelihood(model(*model.train_inputs))
        return output.lazy_covariance_matrix.evaluate_kernel()


def mll_step_fn(model: RegressionGP, test_x: Tensor | None = None) -> Callable[[], Tensor]:
    """One marginal-likelihood step: ``-mll(model(x), y)`` on all training points and its backward pass.

    ``test_x`` is unused; it keeps the signature of the prediction makers.
    """
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    x, y = model.train_inputs[0], model.train_targets

    def step() -> Tensor:
        model.train()
        model.zero_grad(set_to_none=True)
        loss = -mll(model(x), y)
        loss.backward()
        return loss

    return step


def _predict(model: RegressionGP, test_x: Tensor) -> tuple[Tensor, Tensor]:
    """Latent predictive mean and marginal variances at ``test_x`` under ``torch.no_grad()``."""
    model.eval()
    with torch.no_grad():
        output = model(test_x)
        return output.mean, output.variance


def predict_cold_fn(model: RegressionGP, test_x: Tensor) -> Callable[[], tuple[Tensor, Tensor]]:
    """Prediction after clearing the caches (``train()`` then ``eval()``): includes conditioning on the
    training data (the F x F factor, or the N x N Cholesky for the exact GP)."""

    def run() -> tuple[Tensor, Tensor]:
        model.train()
        return _predict(model, test_x)

    return run


def predict_warm_fn(model: RegressionGP, test_x: Tensor) -> Callable[[], tuple[Tensor, Tensor]]:
    """Prediction with the training caches already built (by an untimed call made here)."""
    _predict(model, test_x)
    return lambda: _predict(model, test_x)


MAKERS = {"mll_step": mll_step_fn, "predict_cold": predict_cold_fn, "predict_warm": predict_warm_fn}


def run_gp(
    args: argparse.Namespace, measures: list[str], device: torch.device, dtype: torch.dtype, log: Progress
) -> dict:
    """Time ``measures`` (keys of :data:`MEASURES`) for every peer; medians and ``gprf/peer`` ratios."""
    x, y, test_x = synthetic_data(args.n, args.d, args.test_points, args.seed, device, dtype)
    models = build_models(args, x, y)
    log(f"data: N={args.n}, d={args.d}, M={args.test_points}; models: {', '.join(models)}")

    # Both random-feature models must train through a Woodbury operator (LowRankRootAddedDiagLinearOperator
    # or a subclass of it, such as gprf's FeatureRootAddedDiagLinearOperator): O(N F^2), no N x N matrix.
    train_ops = {name: training_operator(model) for name, model in models.items() if name != "exact"}
    operators = {name: type(op).__name__ for name, op in train_ops.items()}
    same_path = all(isinstance(op, LowRankRootAddedDiagLinearOperator) for op in train_ops.values())
    del train_ops

    times: dict[str, dict[str, list[float]]] = {}
    peaks: dict[str, int | None] = {}
    with gpytorch.settings.max_cholesky_size(CHOLESKY_MAX_SIZE):
        for measure in measures:
            log(f"{MEASURES[measure]}: {args.warmup} warm-up + {args.repeats} timed run(s) of {', '.join(models)}")
            fns = {name: MAKERS[measure](model, test_x) for name, model in models.items()}
            try:
                times[measure] = interleaved_timings(fns, device, args.repeats, args.warmup)
                if measure == "mll_step":  # one untimed step per model, alone, for its peak memory
                    peaks = {name: peak_extra_bytes(fn, device) for name, fn in fns.items()}
            except torch.cuda.OutOfMemoryError:
                raise CLIError(f"out of GPU memory at N={args.n}; lower --n or --exact-max-n") from None
    for model in models.values():
        model.train()

    medians = {measure: {name: statistics.median(v) for name, v in per.items()} for measure, per in times.items()}
    ratios = {
        measure: {f"gprf/{peer}": per["gprf"] / per[peer] for peer in PEERS[1:] if peer in per and per[peer] > 0}
        for measure, per in medians.items()
    }
    return {
        "models": list(models),
        "exact_skipped": "exact" not in models,
        "training_operators": operators,
        "same_training_path": same_path,
        "times_s": times,
        "median_s": medians,
        "ratios": ratios,
        "mll_step_peak_extra_bytes": peaks,
        "root_bytes": args.n * args.features * x.element_size(),
    }


def render_gp(report: dict) -> list[str]:
    """Report lines of :func:`run_gp`'s results (``report`` also holds ``config``)."""
    cfg, medians, ratios = report["config"], report["median_s"], report["ratios"]
    models = report["models"]
    measures = [measure for measure in MEASURES if measure in medians]
    lines = [
        f"GP: N={cfg['n']} training points, d={cfg['d']}, F={cfg['features']} real features "
        f"(RFFKernel num_samples={cfg['rff_num_samples']}), M={cfg['test_points']} test points",
        "models: ConstantMean + ScaleKernel(kernel) + GaussianLikelihood, identical hyperparameters "
        "(lengthscale sqrt(d)/2, outputscale 1, noise 0.01)",
        "training covariance: "
        + ", ".join(f"{name} {op}" for name, op in report["training_operators"].items())
        + (
            " (both LowRankRootAddedDiagLinearOperator: Woodbury identity + determinant lemma, O(N F^2))"
            if report["same_training_path"]
            else "  ** WARNING: not both Woodbury low-rank operators, the comparison is not like for like **"
        ),
    ]
    if report["exact_skipped"]:
        lines.append(f"exact GP skipped: N={cfg['n']} > --exact-max-n {cfg['exact_max_n']}")
    else:
        lines.append("exact GP: dense kernel, Cholesky factorisation (no CG/Lanczos)")
    lines.append(f"times: median of {cfg['repeats']} run(s) after {cfg['warmup']} warm-up run(s), in seconds")
    lines.append("")

    ratio_names = [f"gprf/{peer}" for peer in models if peer != "gprf"]
    rows = [
        [MEASURES[measure]]
        + [format_seconds(medians[measure].get(name)) for name in models]
        + [f"{ratios[measure][r]:.3g}" if r in ratios[measure] else "-" for r in ratio_names]
        for measure in measures
    ]
    lines.append(format_table(["measure", *models, *ratio_names], rows))
    lines.append("")
    peaks = report.get("mll_step_peak_extra_bytes") or {}
    if peaks and all(peak is not None for peak in peaks.values()):
        where = "GPU memory allocated" if cfg["device"].startswith("cuda") else "process resident set size"
        parts = ", ".join(f"{name} {peaks[name] / 2**30:.3g} GiB" for name in models)
        lines.append(
            f"MLL step peak memory above what was held before it ({where}): {parts}; the N x F root alone "
            f"would take {report['root_bytes'] / 2**30:.3g} GiB"
        )
    for measure in measures:
        parts = ", ".join(f"{name} {format_seconds(medians[measure][name])} s" for name in models)
        ratio_text = ", ".join(f"ratio {r} {ratios[measure][r]:.3g}" for r in ratio_names if r in ratios[measure])
        lines.append(f"{MEASURES[measure]}: {parts}; {ratio_text}")
    notes = [
        "MLL step: -ExactMarginalLogLikelihood on all N points, forward and backward to every hyperparameter.",
        "predict : model(test_x).mean and .variance (latent f, marginal variances) at the M test points under "
        "torch.no_grad(); no fast_pred_var (both feature strategies compute exact variances from the F x F "
        "factor and ignore it; the exact GP uses its Cholesky). cold = caches cleared first (train(), eval()), "
        "so conditioning on the training data is included; warm = caches built by an untimed call. Both include "
        "all that GPyTorch's ExactGP.__call__ evaluates per call (e.g. the test x train kernel block).",
        "ratio < 1: gprf is faster.",
    ]
    lines.append("")
    lines += [textwrap.fill(note, width=110, subsequent_indent=" " * 10) for note in notes]
    return lines
