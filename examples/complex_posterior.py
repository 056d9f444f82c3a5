"""Complex polynomial sketches in GP regression: real-part-kernel posterior vs complex posterior vs 2F real features.

For the polynomial kernel ``s² (xᵀy/ℓ² + c)^p``, p in {3, 7}, three random-feature GPs are compared with the exact
GP at the *same* hyperparameters:

* ``real 2F``: a real sketch with 2F real features (the ordinary feature-space posterior);
* ``complex F, real_kernel``: a complex sketch with F complex features and ``posterior="real_kernel"``, the GP with
  the real-part kernel Re(Φ Φᴴ) through its real root [Re Φ, Im Φ] (2F columns);
* ``complex F, complex``: the same complex sketch (the same draws) with ``posterior="complex"``, the real part of
  the complex-feature GP posterior (Wacker, Kanagawa & Filippone 2024, App. D.2–D.3; an F x F complex Hermitian
  capacitance).

All three store 2F real numbers per input. Data (bundled with scikit-learn, no download), non-negative inputs,
where complex sketches have the smaller variance (Wacker et al. 2024, §3.3):

* ``digits``: the 8 x 8 pixel intensities divided by 16, each row scaled to unit Euclidean norm (so xᵀy is in
  [0, 1]); the target is the digit's label 0..9 read as a number. A nearly noise-free regression: the maximum
  marginal likelihood puts the noise at GaussianLikelihood's lower bound 1e-4 for p = 7. Bias c = 0 (the fit
  drives any c > 0 to a homogeneous kernel, through ℓ -> 0 and s² -> 0). 500 training and 400 test points.
* ``diabetes``: the 10 features min-max scaled with the training set's minimum and maximum (so in [0, 1] on the
  training set), the disease-progression target: a noisy regression (noise ≈ half the target variance).
  Bias c = 1. 300 training points, the other 142 for testing.

Targets are standardised with the training mean and standard deviation; the split is a fixed random permutation
(seed 0). Protocol: the exact GP (``ScaleKernel(ScaledPolynomialKernel(p, bias=c))``, ``ConstantMean``,
``GaussianLikelihood``, float64, Cholesky) is fitted by maximising the marginal likelihood on the training set
(L-BFGS). Its ``state_dict`` is loaded into every approximate model (``PolynomialSketchKernel`` has the
``raw_lengthscale`` layout of ``ScaledPolynomialKernel``; only the feature draws are not in it). For every sketch,
F and ``--seeds`` feature draws we report, on the test set:

* KL(approx ‖ exact) of the noisy predictive distributions, mean per test point (:func:`gprf.metrics.gaussian_kl`);
* NMSE and MNLL of the approximate noisy predictive distribution;
* wall-clock of conditioning + prediction: after ``model.train()`` (which drops the cached factor), the time of
  ``model.eval()`` and the first ``likelihood(model(test_x))`` with its mean and variance (training and test
  features, forming and factoring the capacitance, the weight mean, the predictive variances); the median of
  ``--repeats`` runs per draw (the three variants in turn, so load changes hit all of them), then mean ± std over
  draws. Timings use one torch thread by default (``--threads``): on a shared machine, multithreaded BLAS timings
  swing by several times.

Prints markdown tables and writes them to ``complex_posterior.md`` in ``--out DIR`` (default
./complex_posterior_output); ``--plot`` adds ``complex_posterior.png`` there (KL vs F, one panel per dataset, degree
and sketch).

Usage::

    python examples/complex_posterior.py --out results/ --plot          # digits, about 2 min on 2 CPU cores
    python examples/complex_posterior.py --out results/ --quick         # about 10 s (smoke test)
    python examples/complex_posterior.py --out results/ --datasets digits diabetes \
        --sketches srht rademacher gaussian

Reference: J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal of
Machine Learning Research, 2024 (arXiv:2201.08712).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import gpytorch
import torch
from _output import add_output_arguments, output_folder, write_outputs
from gpytorch.kernels import ScaleKernel
from sklearn.datasets import load_diabetes, load_digits

from gprf.kernels import PolynomialSketchKernel, ScaledPolynomialKernel
from gprf.metrics import gaussian_kl, mnll, nmse
from gprf.prediction import ComplexFeaturePredictionStrategy, FeatureSpacePredictionStrategy

SKETCHES = {"srht": "TensorSRHT", "rademacher": "Rademacher", "gaussian": "Gaussian"}
VARIANTS = {"real": "real 2F", "real_kernel": "complex F, real_kernel", "complex": "complex F, complex"}
# Bias c of (xᵀy/ℓ² + c)^p and the training / test sizes (test None: the rest of the dataset).
DATASETS = {
    "digits": {"bias": 0.0, "train": 500, "test": 400, "quick_train": 300, "quick_test": 200},
    "diabetes": {"bias": 1.0, "train": 300, "test": None, "quick_train": 300, "quick_test": None},
}
# Exact GPs by Cholesky whatever N (GPyTorch switches to conjugate gradients above 800 points).
EXACT = gpytorch.settings.max_cholesky_size(100_000)


class Model(gpytorch.models.ExactGP):
    """A plain GPyTorch regression model; only ``covar_module`` differs between the exact and approximate GPs."""

    def __init__(self, train_x, train_y, covar_module):
        super().__init__(train_x, train_y, gpytorch.likelihoods.GaussianLikelihood())
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = covar_module

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


# ---------------------------------------------------------------------------------------------- data
def load(name: str, num_train: int, num_test: int | None) -> tuple[torch.Tensor, ...]:
    """Non-negative inputs and standardised targets (train_x, train_y, test_x, test_y); see the module docstring."""
    if name == "digits":
        data = load_digits()
        x = torch.as_tensor(data.data, dtype=torch.float64) / 16.0
        x = x / x.norm(dim=-1, keepdim=True)
    else:
        data = load_diabetes()
        x = torch.as_tensor(data.data, dtype=torch.float64)
    y = torch.as_tensor(data.target, dtype=torch.float64)
    num_test = x.size(0) - num_train if num_test is None else num_test
    if num_train < 2 or num_test < 2 or num_train + num_test > x.size(0):
        raise ValueError(
            f"--train ({num_train}) and --test ({num_test}) must be >= 2 and sum to <= {x.size(0)} for {name}."
        )
    order = torch.randperm(x.size(0), generator=torch.Generator().manual_seed(0))
    train, test = order[:num_train], order[num_train : num_train + num_test]
    if name == "diabetes":
        low, high = x[train].min(0).values, x[train].max(0).values
        x = (x - low) / (high - low)
    y = (y - y[train].mean()) / y[train].std()
    return x[train], y[train], x[test], y[test]


# ---------------------------------------------------------------------------------------------- models
def fit_exact(x: torch.Tensor, y: torch.Tensor, degree: int, bias: float, iterations: int) -> Model:
    """Exact GP with the hyperparameters that maximise the marginal likelihood (L-BFGS, Cholesky)."""
    model = Model(x, y, ScaleKernel(ScaledPolynomialKernel(degree, bias=bias))).double()
    model.likelihood.noise = 0.1
    model.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    optimizer = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=iterations, line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = -mll(model(x), y)
        loss.backward()
        return loss

    with EXACT:
        optimizer.step(closure)
    return model.eval()


def approximate(exact: Model, sketch: str, variant: str, num_features: int, seed: int) -> Model:
    """A sketch model with the exact model's hyperparameters: 2F real features or F complex ones."""
    x, y = exact.train_inputs[0], exact.train_targets
    target = exact.covar_module.base_kernel
    kernel = PolynomialSketchKernel(
        2 * num_features if variant == "real" else num_features,
        num_dims=x.size(-1),
        degree=target.degree,
        sketch=sketch,
        complex=variant != "real",
        bias=target.bias,
        seed=seed,
        posterior="complex" if variant == "complex" else "real_kernel",
    )
    model = Model(x, y, ScaleKernel(kernel)).double()
    missing, unexpected = model.load_state_dict(exact.state_dict(), strict=False)
    if unexpected or any(".feature_map." not in key for key in missing):
        raise RuntimeError(f"the hyperparameters did not transfer: missing {missing}, unexpected {unexpected}")
    # The sketch's target kernel is the exact model's kernel.
    with torch.no_grad():
        sample = x[:8]
        target_matrix = model.covar_module.outputscale * kernel.exact()(sample).to_dense()
        torch.testing.assert_close(target_matrix, exact.covar_module(sample).to_dense())
    return model.eval()


def predict(model: Model, test_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and variance of the noisy predictive distribution."""
    with torch.no_grad(), EXACT:
        output = model.likelihood(model(test_x))
        return output.mean, output.variance


def timed_predict(model: Model, test_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Predictions and the wall-clock of conditioning (caches cleared) + the first prediction."""
    model.train()  # drops the prediction strategy and its cached factor
    start = time.perf_counter()
    model.eval()
    mean, var = predict(model, test_x)
    return mean, var, time.perf_counter() - start


def _check_strategy(model: Model, variant: str) -> None:
    expected = ComplexFeaturePredictionStrategy if variant == "complex" else FeatureSpacePredictionStrategy
    if type(model.prediction_strategy) is not expected:
        used = type(model.prediction_strategy).__name__
        raise RuntimeError(f"{variant}: GPyTorch used {used}, not {expected.__name__}")


# ---------------------------------------------------------------------------------------------- experiment
def run_dataset(name: str, args) -> tuple[dict, list[dict], list[dict]]:
    """Exact-GP rows and approximation rows (one per degree, sketch, F and variant) for one dataset."""
    sizes = DATASETS[name]
    num_train = args.train or sizes["quick_train" if args.quick else "train"]
    num_test = args.test or sizes["quick_test" if args.quick else "test"]
    bias = sizes["bias"] if args.bias is None else args.bias
    train_x, train_y, test_x, test_y = load(name, num_train, num_test)
    info = {"dataset": name, "n": train_x.size(0), "m": test_x.size(0), "d": train_x.size(1), "bias": bias}
    exact_rows, rows = [], []
    config = 0
    for degree in args.degrees:
        start = time.perf_counter()
        exact = fit_exact(train_x, train_y, degree, bias, args.iterations)
        fit_time = time.perf_counter() - start
        exact_mean, exact_var, _ = timed_predict(exact, test_x)
        exact_time = statistics.median(timed_predict(exact, test_x)[2] for _ in range(args.repeats))
        exact_rows.append(
            {
                **info,
                "degree": degree,
                "lengthscale": exact.covar_module.base_kernel.lengthscale.item(),
                "outputscale": exact.covar_module.outputscale.item(),
                "noise": exact.likelihood.noise.item(),
                "nmse": nmse(exact_mean, test_y).item(),
                "mnll": mnll(exact_mean, exact_var, test_y).item(),
                "fit_s": fit_time,
                "time_s": exact_time,
            }
        )
        for sketch in args.sketches:
            for num_features in args.features:
                results = {variant: {"kl": [], "nmse": [], "mnll": [], "time": []} for variant in VARIANTS}
                for draw in range(args.seeds):
                    seed = args.seed + 1000 * config + draw  # the two complex variants share their draws
                    models = {variant: approximate(exact, sketch, variant, num_features, seed) for variant in VARIANTS}
                    times = {variant: [] for variant in VARIANTS}
                    for repeat in range(args.repeats):
                        for variant, model in models.items():  # in turn, so that load changes hit every variant
                            mean, var, elapsed = timed_predict(model, test_x)
                            times[variant].append(elapsed)
                            if repeat == 0:
                                _check_strategy(model, variant)
                                record = results[variant]
                                record["kl"].append(gaussian_kl(mean, var, exact_mean, exact_var).item())
                                record["nmse"].append(nmse(mean, test_y).item())
                                record["mnll"].append(mnll(mean, var, test_y).item())
                    for variant in VARIANTS:
                        results[variant]["time"].append(statistics.median(times[variant]))
                config += 1
                for variant, record in results.items():
                    rows.append(
                        {
                            **info,
                            "degree": degree,
                            "sketch": sketch,
                            "F": num_features,
                            "variant": variant,
                            **{key: _mean_std(values) for key, values in record.items()},
                        }
                    )
                if args.verbose:
                    summary = ", ".join(f"{v} KL {results[v]['kl'][0]:.3g}" for v in VARIANTS)
                    print(f"{name} p={degree} {sketch} F={num_features}: {summary}", flush=True)
    return info, exact_rows, rows


def _mean_std(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else float("nan")


# ---------------------------------------------------------------------------------------------- output
def _cell(value: tuple[float, float], scale: float = 1.0) -> str:
    mean, std = value
    return f"{mean * scale:.3g} ± {std * scale:.2g}"


def markdown_tables(args, infos: list[dict], exact_rows: list[dict], rows: list[dict]) -> str:
    lines = [
        f"Kernel s² (xᵀy/ℓ² + c)^p with the exact GP's hyperparameters; "
        f"mean ± std over {args.seeds} feature draws; "
        f"time: conditioning + prediction in ms, median of {args.repeats} runs per draw, "
        f"{torch.get_num_threads()} torch thread(s). F = number of complex features; the real sketch has 2F.",
        "",
        "Exact GPs (maximum marginal likelihood):",
        "",
        "| dataset | n train | n test | d | c | p | ℓ | s² | noise | NMSE | MNLL | fit (s) | predict (ms) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in exact_rows:
        lines.append(
            f"| {row['dataset']} | {row['n']} | {row['m']} | {row['d']} | {row['bias']:g} | {row['degree']} | "
            f"{row['lengthscale']:.3g} | {row['outputscale']:.3g} | {row['noise']:.3g} | {row['nmse']:.4f} | "
            f"{row['mnll']:.4f} | {row['fit_s']:.1f} | {1000 * row['time_s']:.0f} |"
        )
    lines.append("")
    for info in infos:
        for degree in args.degrees:
            for sketch in args.sketches:
                group = [
                    r for r in rows if (r["dataset"], r["degree"], r["sketch"]) == (info["dataset"], degree, sketch)
                ]
                lines.append(f"**{info['dataset']}, p = {degree}, {SKETCHES[sketch]}**")
                lines.append("")
                lines.append("| F | variant | KL(approx ‖ exact) | NMSE | MNLL | time (ms) |")
                lines.append("|---|---|---|---|---|---|")
                for row in group:
                    lines.append(
                        f"| {row['F']} | {VARIANTS[row['variant']]} | {_cell(row['kl'])} | {_cell(row['nmse'])} | "
                        f"{_cell(row['mnll'])} | {_cell(row['time'], 1000.0)} |"
                    )
                lines.append("")
    return "\n".join(lines)


def plot(args, infos: list[dict], rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(info, degree) for info in infos for degree in args.degrees]
    figure, axes = plt.subplots(
        len(panels),
        len(args.sketches),
        figsize=(4.0 * len(args.sketches), 3.2 * len(panels)),
        squeeze=False,
        layout="constrained",
    )
    markers = {"real": "o", "real_kernel": "s", "complex": "^"}
    for i, (info, degree) in enumerate(panels):
        for j, sketch in enumerate(args.sketches):
            axis = axes[i, j]
            for variant, label in VARIANTS.items():
                key = (info["dataset"], degree, sketch, variant)
                group = [r for r in rows if (r["dataset"], r["degree"], r["sketch"], r["variant"]) == key]
                counts = [r["F"] for r in group]
                means = [r["kl"][0] for r in group]
                stds = [0.0 if r["kl"][1] != r["kl"][1] else r["kl"][1] for r in group]
                axis.errorbar(counts, means, yerr=stds, marker=markers[variant], markersize=4, capsize=3, label=label)
            # Interpolation thresholds: 2F = n for the real-root posteriors, F = n for the complex posterior.
            for position, style in ((info["n"] / 2, ":"), (info["n"], "--")):
                if min(args.features) <= position <= max(args.features):
                    axis.axvline(position, color="grey", linestyle=style, linewidth=0.8)
            axis.set_xscale("log", base=2)
            axis.set_yscale("log")
            axis.set_xticks(args.features, [str(f) for f in args.features])
            axis.set_xlabel("F (complex features; real sketch: 2F)")
            axis.set_ylabel("KL(approx ‖ exact) per test point")
            axis.set_title(f"{info['dataset']} (n = {info['n']}), p = {degree}, {SKETCHES[sketch]}", fontsize=9)
            axis.grid(True, which="both", alpha=0.3)
            axis.legend(fontsize=7)
    figure.suptitle(
        f"Polynomial-kernel GP, exact-GP hyperparameters: mean ± std over {args.seeds} draws "
        "(dotted: F = n/2, dashed: F = n)",
        fontsize=10,
    )
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_output_arguments(parser, "complex_posterior", tables="complex_posterior.md")
    parser.add_argument("--quick", action="store_true", help="fewer points, F values, draws and timings (smoke test)")
    parser.add_argument(
        "--datasets", nargs="+", choices=tuple(DATASETS), default=["digits"], help="datasets to run (default: digits)"
    )
    parser.add_argument(
        "--train", type=int, default=None, help="training points (digits 500, diabetes 300; --quick: 300)"
    )
    parser.add_argument(
        "--test", type=int, default=None, help="test points (digits 400, --quick 200; diabetes: the rest)"
    )
    parser.add_argument("--bias", type=float, default=None, help="c in (xᵀy/ℓ² + c)^p (digits 0, diabetes 1)")
    parser.add_argument(
        "--degrees", type=int, nargs="+", default=[3, 7], help="polynomial degrees p of the kernel (default: 3 7)"
    )
    parser.add_argument(
        "--features", type=int, nargs="+", default=None, help="F values (default 64 128 256 512 1024; --quick 32 128)"
    )
    parser.add_argument(
        "--sketches",
        nargs="+",
        choices=tuple(SKETCHES),
        default=["srht", "rademacher"],
        help="polynomial sketches to compare (default: srht rademacher)",
    )
    parser.add_argument("--seeds", type=int, default=None, help="feature draws per setting (default 3; --quick 2)")
    parser.add_argument(
        "--repeats", type=int, default=None, help="timed runs per draw, median taken (default 3; --quick 1)"
    )
    parser.add_argument(
        "--iterations", type=int, default=None, help="L-BFGS iterations of the exact fit (100; --quick 30)"
    )
    parser.add_argument("--seed", type=int, default=0, help="base seed of the feature draws")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: stable timings on a shared machine; 0: torch's choice)",
    )
    parser.add_argument("--verbose", action="store_true", help="print progress")
    args = parser.parse_args(argv)
    args.features = sorted(set(args.features or ([32, 128] if args.quick else [64, 128, 256, 512, 1024])))
    args.seeds = args.seeds or (2 if args.quick else 3)
    args.repeats = args.repeats or (1 if args.quick else 3)
    args.iterations = args.iterations or (30 if args.quick else 100)
    if min(args.features) < 1 or min(args.degrees) < 0 or args.seeds < 1 or args.repeats < 1 or args.threads < 0:
        parser.error("--features, --seeds and --repeats must be >= 1; --degrees and --threads >= 0")
    if args.bias is not None and args.bias < 0:
        parser.error("--bias must be >= 0")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float64)  # feature maps draw their buffers in the default dtype

    output = output_folder(parser, args, "complex_posterior")
    start = time.perf_counter()
    infos, exact_rows, rows = [], [], []
    for name in dict.fromkeys(args.datasets):
        info, exact_part, part = run_dataset(name, args)
        infos.append(info)
        exact_rows += exact_part
        rows += part
    table = markdown_tables(args, infos, exact_rows, rows)
    print(table)

    draw = (lambda path: plot(args, infos, rows, path)) if args.plot else None
    write_outputs(output, "complex_posterior", table=table, draw=draw, started=start)


if __name__ == "__main__":
    main()
