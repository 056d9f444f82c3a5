"""Optimized Maclaurin features vs random Fourier features in GP regression with the Gaussian kernel.

Follows the GP-regression protocol of Wacker, Kanagawa & Filippone (2024, §6.1.3, §6.4.2) on two datasets
bundled with scikit-learn (no download):

* **diabetes** (442 x 10, target: disease progression);
* **digits** (the first ``--digits-rows`` of 1797 x 64 images, target: the digit value 0-9 read as a
  real number, a derived regression target).

Protocol, per dataset:

1. random 80/20 train/test split (``--seed``); inputs and target standardised with the training
   statistics (constant columns keep a unit scale);
2. the exact GP -- ``ConstantMean``, ``ScaleKernel(RBFKernel(ard_num_dims=d))`` (**ARD**: one lengthscale
   per input), ``GaussianLikelihood`` -- fitted by maximising the exact marginal likelihood with Adam;
3. for every method, ``F`` in {d, 3d, 5d} and feature seed, a random-feature GP with the *same*
   hyperparameters (copied, never re-fitted). Maclaurin kernels get the exact lengthscale first and then
   ``refit_allocation(train_x)``, so the allocation is optimized on the training inputs divided by the
   exact GP's lengthscale (recipe 1 of :class:`gprf.kernels.MaclaurinKernel`);
4. metrics against the exact GP: KL(approx || exact) of the noisy predictive marginals, mean per test
   point (:func:`gprf.metrics.gaussian_kl`); test NMSE and MNLL (standardised target); relative Frobenius
   error of the ``ScaleKernel`` matrix on the training inputs. Mean ± std over ``--seeds`` feature draws
   (one data split and one hyperparameter fit per dataset).

Methods (``F`` is the nominal number of features; "real columns" is the width of the real feature root,
i.e. the cost of the O(NF^2) solve):

=================  ===============================================================  ============
name               kernel                                                           real columns
=================  ===============================================================  ============
``rff``            ``RandomFourierKernel(F, sampler="iid")``                        F
``orf``            ``RandomFourierKernel(F, sampler="orthogonal")``                 F
``rand-macl``      ``MaclaurinKernel(F, kernel="gaussian", allocation="random")``   F
``macl-rad``       optimized Maclaurin, Rademacher sketch                           F
``macl-srht``      optimized Maclaurin, real TensorSRHT                             F
``macl-srht-c``    optimized Maclaurin, complex TensorSRHT with F complex features  2F
``macl-srht-c/2``  optimized Maclaurin, complex TensorSRHT with F/2 complex         F
=================  ===============================================================  ============

``macl-srht-c`` is the paper's convention (F complex features); ``macl-srht-c/2`` is the same method at
equal real columns. Random Maclaurin (Kar & Karnick) is the unoptimized reference.

Prints markdown tables (and the optimized allocations) and writes them to ``maclaurin_regression.md`` in ``--out DIR``
(default ./maclaurin_regression_output); ``--plot`` adds ``maclaurin_regression.png`` there.

Usage::

    python examples/maclaurin_regression.py --out results/ --plot     # ~2 min on 2 CPU cores
    python examples/maclaurin_regression.py --out results/ --quick    # < 30 s (smoke test)

References:
    * J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal of Machine
      Learning Research, 2024 (arXiv:2201.08712).
    * P. Kar, H. Karnick. *Random Feature Maps for Dot Product Kernels.* International Conference on Artificial
      Intelligence and Statistics (AISTATS), 2012.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import gpytorch
import torch
from _output import add_output_arguments, output_folder, write_outputs
from gpytorch.kernels import RBFKernel, ScaleKernel
from sklearn.datasets import load_diabetes, load_digits

from gprf.kernels import MaclaurinKernel, RandomFeatureKernel, RandomFourierKernel
from gprf.metrics import gaussian_kl, mnll, nmse, relative_frobenius_error

MULTIPLES = (1, 3, 5)
DATASETS = ("diabetes", "digits")


@dataclass(frozen=True)
class Method:
    name: str
    label: str
    build: Callable[[int, int, int], RandomFeatureKernel]  # (F, d, seed) -> unscaled kernel
    optimized: bool = False  # Maclaurin with an optimized allocation (needs refit_allocation)


def _fourier(sampler):
    return lambda f, d, seed: RandomFourierKernel(f, d, sampler=sampler, seed=seed, ard_num_dims=d)


def _maclaurin(sketch, complex_=False, allocation="optimized", divisor=1):
    def build(f, d, seed):
        return MaclaurinKernel(
            f // divisor,
            d,
            kernel="gaussian",
            sketch=sketch,
            complex=complex_,
            allocation=allocation,
            seed=seed,
            ard_num_dims=d,
        )

    return build


METHODS = (
    Method("rff", "RFF (iid)", _fourier("iid")),
    Method("orf", "ORF", _fourier("orthogonal")),
    Method("rand-macl", "random Maclaurin (Rademacher)", _maclaurin("rademacher", allocation="random")),
    Method("macl-rad", "opt. Maclaurin, Rademacher", _maclaurin("rademacher"), True),
    Method("macl-srht", "opt. Maclaurin, TensorSRHT", _maclaurin("srht"), True),
    Method("macl-srht-c", "opt. Maclaurin, complex TensorSRHT (2F real cols)", _maclaurin("srht", True), True),
    Method(
        "macl-srht-c/2",
        "opt. Maclaurin, complex TensorSRHT, F/2 complex (F real cols)",
        _maclaurin("srht", True, divisor=2),
        True,
    ),
)


# ------------------------------------------------------------------------------------------------ data
@dataclass
class Split:
    name: str
    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor


def load_split(name: str, digits_rows: int, seed: int) -> Split:
    """80/20 split, inputs and target standardised with the training statistics (float64)."""
    if name == "diabetes":
        bunch = load_diabetes()
        x, y = bunch.data, bunch.target
    else:
        bunch = load_digits()
        x, y = bunch.data[:digits_rows], bunch.target[:digits_rows]  # derived target: the digit value
    x = torch.as_tensor(x, dtype=torch.float64)
    y = torch.as_tensor(y, dtype=torch.float64)
    order = torch.randperm(x.size(0), generator=torch.Generator().manual_seed(seed))
    num_test = round(0.2 * x.size(0))
    test, train = order[:num_test], order[num_test:]
    x_mean, x_std = x[train].mean(0), x[train].std(0)
    x_std[x_std == 0] = 1.0  # constant columns (digits' border pixels) stay constant
    y_mean, y_std = y[train].mean(), y[train].std()
    x, y = (x - x_mean) / x_std, (y - y_mean) / y_std
    return Split(name, x[train], y[train], x[test], y[test])


# ------------------------------------------------------------------------------------------------ models
class GP(gpytorch.models.ExactGP):
    def __init__(self, train_x, train_y, base_kernel):
        super().__init__(train_x, train_y, gpytorch.likelihoods.GaussianLikelihood())
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = ScaleKernel(base_kernel)

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def fit_exact(split: Split, iterations: int) -> GP:
    """The exact ARD RBF GP, hyperparameters by Adam on the exact marginal likelihood."""
    d = split.train_x.size(1)
    model = GP(split.train_x, split.train_y, RBFKernel(ard_num_dims=d))
    model.covar_module.base_kernel.lengthscale = math.sqrt(d)
    model.covar_module.outputscale = 1.0
    model.likelihood.noise = 0.1
    model.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    with gpytorch.settings.max_cholesky_size(10**5):
        for _ in range(iterations):
            optimizer.zero_grad()
            loss = -mll(model(split.train_x), split.train_y)
            loss.backward()
            optimizer.step()
    model.eval()
    return model


def copy_hyperparameters(source: GP, target: GP) -> None:
    target.mean_module.constant = source.mean_module.constant.detach().clone()
    target.covar_module.outputscale = source.covar_module.outputscale.detach().clone()
    target.covar_module.base_kernel.lengthscale = source.covar_module.base_kernel.lengthscale.detach().clone()
    target.likelihood.noise = source.likelihood.noise.detach().clone()


def predict(model: GP, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Noisy predictive mean and variance."""
    model.eval()
    with torch.no_grad(), gpytorch.settings.max_cholesky_size(10**5):
        output = model.likelihood(model(x))
        return output.mean, output.variance


# ------------------------------------------------------------------------------------------------ run
@dataclass
class Cell:
    """Per-seed metrics of one (dataset, method, F)."""

    real_columns: int = 0
    allocation: list[int] | None = None
    seconds: float = 0.0
    values: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in ("kl", "nmse", "mnll", "frob")})
    pointwise_kl: torch.Tensor | None = None  # per test point, averaged over the draws


def feature_counts(d: int) -> list[int]:
    """F = k d for k in MULTIPLES, rounded up to even (RFF needs F/2 cosine + F/2 sine features)."""
    return [2 * math.ceil(k * d / 2) for k in MULTIPLES]


def run_dataset(split: Split, methods, seeds: int, seed: int, fit_iters: int, log) -> dict:
    start = time.perf_counter()
    exact = fit_exact(split, fit_iters)
    d = split.train_x.size(1)
    lengthscale = exact.covar_module.base_kernel.lengthscale.detach()
    exact_mean, exact_var = predict(exact, split.test_x)
    with torch.no_grad():
        exact_train = exact.covar_module(split.train_x).to_dense()
    # Distance of each test point from the Maclaurin centre (the training mean), in lengthscale units.
    radius = ((split.test_x - split.train_x.mean(0)) / lengthscale).norm(dim=-1)
    terciles = torch.tensor_split(radius.argsort(), 3)
    summary = {
        "name": split.name,
        "n_train": split.train_x.size(0),
        "n_test": split.test_x.size(0),
        "d": d,
        "outputscale": exact.covar_module.outputscale.item(),
        "noise": exact.likelihood.noise.item(),
        "lengthscale_range": (lengthscale.min().item(), lengthscale.max().item()),
        "exact_nmse": nmse(exact_mean, split.test_y).item(),
        "exact_mnll": mnll(exact_mean, exact_var, split.test_y).item(),
        "fit_seconds": time.perf_counter() - start,
        "counts": feature_counts(d),
        "terciles": terciles,
        "tercile_radii": [radius[t].mean().item() for t in terciles],
        "train_radius_median": ((split.train_x - split.train_x.mean(0)) / lengthscale).norm(dim=-1).median().item(),
        "cells": {},
    }
    log(
        f"{split.name}: exact GP fitted in {summary['fit_seconds']:.1f} s, NMSE {summary['exact_nmse']:.4f}, "
        f"MNLL {summary['exact_mnll']:.4f}"
    )
    for method_index, method in enumerate(methods):
        for num_features in summary["counts"]:
            cell = Cell()
            tic = time.perf_counter()
            for draw in range(seeds):
                draw_seed = seed + 1000 * draw + 100 * method_index + num_features
                model = GP(split.train_x, split.train_y, method.build(num_features, d, draw_seed))
                copy_hyperparameters(exact, model)  # lengthscale first ...
                if method.optimized:  # ... then the allocation, at the exact GP's lengthscale
                    result = model.covar_module.base_kernel.refit_allocation(split.train_x)
                    cell.allocation = result.counts
                mean, var = predict(model, split.test_x)
                with torch.no_grad():
                    approx_train = model.covar_module(split.train_x)
                    cell.values["frob"].append(relative_frobenius_error(approx_train, exact_train).item())
                pointwise = gaussian_kl(mean[:, None], var[:, None], exact_mean[:, None], exact_var[:, None])
                cell.pointwise_kl = pointwise / seeds + (0 if cell.pointwise_kl is None else cell.pointwise_kl)
                cell.values["kl"].append(gaussian_kl(mean, var, exact_mean, exact_var).item())
                cell.values["nmse"].append(nmse(mean, split.test_y).item())
                cell.values["mnll"].append(mnll(mean, var, split.test_y).item())
                cell.real_columns = model.covar_module.base_kernel.root_dim
            cell.seconds = time.perf_counter() - tic
            summary["cells"][method.name, num_features] = cell
        log(f"  {method.name}: done")
    return summary


# ------------------------------------------------------------------------------------------------ output
METRICS = {
    "kl": "KL(approx || exact) per test point",
    "nmse": "test NMSE",
    "mnll": "test MNLL",
    "frob": "relative Frobenius error of the train kernel matrix",
}
SHORT = {
    "kl": "KL(approx || exact) per test point",
    "nmse": "test NMSE",
    "mnll": "test MNLL",
    "frob": "rel. Frobenius error of K(X, X)",
}


def _mean_std(values: list[float]) -> tuple[float, float]:
    t = torch.tensor(values)
    return t.mean().item(), (t.std().item() if len(values) > 1 else float("nan"))


def _format(mean: float, std: float) -> str:
    digits = 4 if abs(mean) < 10 else 1
    return f"{mean:.{digits}f} ± {std:.{digits}f}" if math.isfinite(std) else f"{mean:.{digits}f}"


def markdown(summaries: list[dict], methods, seeds: int) -> str:
    lines = ["Methods: " + "; ".join(f"`{m.name}` = {m.label}" for m in methods) + ".", ""]
    for s in summaries:
        low, high = s["lengthscale_range"]
        lines.append(
            f"### {s['name']} (n_train = {s['n_train']}, n_test = {s['n_test']}, d = {s['d']})\n\n"
            f"Exact GP (ARD RBF): outputscale {s['outputscale']:.3g}, noise {s['noise']:.3g}, lengthscales "
            f"{low:.3g}..{high:.3g}; test NMSE {s['exact_nmse']:.4f}, MNLL {s['exact_mnll']:.4f}. "
            f"Mean ± std over {seeds} feature draws.\n"
        )
        counts = s["counts"]
        for key, title in METRICS.items():
            lines.append(f"**{title}**\n")
            lines.append("| method | " + " | ".join(f"F = {f}" for f in counts) + " |")
            lines.append("|---|" + "---|" * len(counts))
            for method in methods:
                cells = [s["cells"][method.name, f] for f in counts]
                text = []
                for f, cell in zip(counts, cells, strict=True):
                    entry = _format(*_mean_std(cell.values[key]))
                    if cell.real_columns != f:
                        entry += f" ({cell.real_columns} cols)"
                    text.append(entry)
                lines.append(f"| {method.name} | " + " | ".join(text) + " |")
            lines.append("")
        largest = counts[-1]
        radii = ", ".join(f"{r:.2f}" for r in s["tercile_radii"])
        lines.append(
            f"**KL per test point by distance from the centre, F = {largest}** (test points split into terciles "
            f"of ||(x - mean) / lengthscale||; mean distances {radii}; training median "
            f"{s['train_radius_median']:.2f})\n"
        )
        lines.append("| method | near | middle | far |")
        lines.append("|---|---|---|---|")
        for method in methods:
            pointwise = s["cells"][method.name, largest].pointwise_kl
            cells = [f"{pointwise[t].mean().item():.4f}" for t in s["terciles"]]
            lines.append(f"| {method.name} | " + " | ".join(cells) + " |")
        lines.append("")
        lines.append("**optimized allocations [D_1, D_2, ...] (constant feature extra) and seconds per setting**\n")
        lines.append("| method | " + " | ".join(f"F = {f}" for f in counts) + " |")
        lines.append("|---|" + "---|" * len(counts))
        for method in methods:
            text = []
            for f in counts:
                cell = s["cells"][method.name, f]
                text.append((f"{cell.allocation} " if cell.allocation is not None else "") + f"{cell.seconds:.1f} s")
            lines.append(f"| {method.name} | " + " | ".join(text) + " |")
        lines.append("")
    return "\n".join(lines)


def plot(summaries: list[dict], methods, path: Path, seeds: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    keys = ("kl", "frob", "mnll")
    figure, axes = plt.subplots(
        len(summaries),
        len(keys),
        figsize=(4.3 * len(keys), 3.4 * len(summaries)),
        squeeze=False,
        layout="constrained",
    )
    markers = "os^vDPX"
    for row, s in enumerate(summaries):
        for col, key in enumerate(keys):
            axis = axes[row, col]
            for index, method in enumerate(methods):
                cells = [s["cells"][method.name, f] for f in s["counts"]]
                columns = [cell.real_columns for cell in cells]
                stats = [_mean_std(cell.values[key]) for cell in cells]
                axis.errorbar(
                    columns,
                    [m for m, _ in stats],
                    yerr=[0 if math.isnan(e) else e for _, e in stats],
                    marker=markers[index % len(markers)],
                    markersize=4,
                    capsize=3,
                    label=method.name,
                    linestyle="--" if method.name == "rand-macl" else "-",
                )
            if key == "mnll":
                axis.axhline(s["exact_mnll"], color="black", linewidth=1, linestyle=":", label="exact GP")
            else:
                axis.set_yscale("log")
            axis.set_xscale("log")
            ticks = sorted({cell.real_columns for cell in s["cells"].values()})
            axis.set_xticks(ticks, [str(t) for t in ticks], fontsize=7)
            axis.xaxis.set_minor_locator(NullLocator())
            axis.set_xlabel("real feature columns (complex F counts twice)")
            axis.set_title(f"{s['name']} (d = {s['d']}): {SHORT[key]}", fontsize=9)
            axis.grid(True, which="both", alpha=0.3)
        axes[row, 0].legend(fontsize=7)
    figure.suptitle(f"Gaussian-kernel GP regression, mean ± std over {seeds} feature draws", fontsize=11)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_output_arguments(parser, "maclaurin_regression", tables="maclaurin_regression.md")
    parser.add_argument("--quick", action="store_true", help="fewer rows, draws and fit steps (smoke test)")
    parser.add_argument("--seeds", type=int, default=None, help="feature draws per setting (default 10; --quick: 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the split and base seed of the draws")
    parser.add_argument("--digits-rows", type=int, default=None, help="digits rows used (default 1000; --quick: 400)")
    parser.add_argument(
        "--fit-iters", type=int, default=None, help="Adam steps of the exact GP (default 150; --quick: 50)"
    )
    parser.add_argument(
        "--datasets", nargs="+", choices=DATASETS, default=list(DATASETS), help="datasets to run (default: both)"
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=[m.name for m in METHODS],
        default=[m.name for m in METHODS],
        help="feature maps to compare (default: all)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (default 1: the matrices are small, extra threads only contend; 0: torch's choice)",
    )
    args = parser.parse_args(argv)
    seeds = args.seeds or (2 if args.quick else 10)
    digits_rows = args.digits_rows or (400 if args.quick else 1000)
    fit_iters = args.fit_iters or (50 if args.quick else 150)
    if seeds < 1 or digits_rows < 10 or fit_iters < 1 or args.threads < 0:
        parser.error("--seeds and --fit-iters must be >= 1, --digits-rows >= 10, --threads >= 0")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float64)  # hyperparameters and feature draws in float64
    methods = [m for m in METHODS if m.name in args.methods]

    output = output_folder(parser, args, "maclaurin_regression")
    start = time.perf_counter()
    summaries = []
    for name in args.datasets:
        split = load_split(name, digits_rows, args.seed)
        summaries.append(run_dataset(split, methods, seeds, args.seed, fit_iters, print))
    table = markdown(summaries, methods, seeds)
    print()
    print(table)

    draw = (lambda path: plot(summaries, methods, path, seeds)) if args.plot else None
    write_outputs(output, "maclaurin_regression", table=table, draw=draw, started=start)


if __name__ == "__main__":
    main()
