"""``gprf compare``: how well does each kernel approximation reproduce the exact GP on your data?

Steps: load the data (the bundled *diabetes* set of Efron et al. 2004 by default, or ``--data file.csv
--target column``); split train/test with a seed and standardise with the training statistics; fit the
exact GP's hyperparameters (``ConstantMean``, ``ScaleKernel`` of an ARD RBF/Matérn kernel,
``GaussianLikelihood``) by marginal likelihood on a subsample; condition the exact GP on the training
rows; then, for every requested approximation (:mod:`gprf.cli.approximations`) and feature draw, build
the random-feature GP with the *same* hyperparameters, condition it and predict the test set.

Reported per method (mean over ``--repeats`` feature draws): the relative Frobenius error of the
training kernel matrix, the KL divergence KL(approx || exact) between the noisy predictive marginals
(mean per test point), test RMSE, NMSE and MNLL on the standardised target, and fit/predict times.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import statistics
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from linear_operator.utils.errors import NanError, NotPSDError

from gprf.cli.approximations import (
    APPROXIMATIONS,
    Approximation,
    ApproximationRequest,
    kernel_family,
    methods_for_kernel,
)
from gprf.cli.data import BUILTIN_DATASETS, DEFAULT_DATASET, Dataset, Split, load_dataset, split_dataset
from gprf.cli.kernel_spec import KernelSpecError, is_composite_spec, read_kernel_spec
from gprf.cli.models import (
    EXACT_KERNELS,
    Hyperparameters,
    RegressionGP,
    exact_kernel,
    fit_hyperparameters,
    get_hyperparameters,
    initialize_hyperparameters,
    predict,
    set_hyperparameters,
)
from gprf.cli.options import (
    DTYPES,
    CLIError,
    add_device_arguments,
    apply_threads,
    check_output_path,
    fraction,
    non_negative_int,
    positive_float,
    positive_int,
    require_matplotlib,
    resolve_device,
)
from gprf.cli.report import Progress, format_number, format_seconds, format_table, write_json
from gprf.cli.timing import timed
from gprf.metrics import gaussian_kl, mnll, nmse, relative_frobenius_error

if TYPE_CHECKING:  # matplotlib is optional: imported where a figure is drawn
    from matplotlib.figure import Figure

METRICS = ("frobenius", "kl", "rmse", "nmse", "mnll", "fit_s", "predict_s")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    methods_help = "; ".join(f"{name}: {approx.summary}" for name, approx in APPROXIMATIONS.items())
    parser = subparsers.add_parser(
        "compare",
        help="compare kernel approximations against the exact GP on a dataset",
        description=__doc__.split("\n\n")[0].strip().removeprefix("``gprf compare``: "),
        epilog=f"Methods -- {methods_help}.",
    )
    data = parser.add_argument_group("data")
    data.add_argument(
        "--data",
        metavar="FILE.csv|NAME",
        help=f"CSV file with a header row, or a built-in dataset ({', '.join(sorted(BUILTIN_DATASETS))}; "
        f"default: {DEFAULT_DATASET})",
    )
    data.add_argument("--target", metavar="COLUMN", help="target column of --data FILE.csv (required with a CSV)")
    data.add_argument(
        "--test-fraction", type=fraction, metavar="FRAC", default=0.2, help="test share of the rows (default: 0.2)"
    )
    data.add_argument(
        "--max-train",
        type=positive_int,
        metavar="N",
        default=5000,
        help="at most this many training rows (the exact GP is O(N^3); default: 5000)",
    )
    model = parser.add_argument_group("model")
    model.add_argument(
        "--kernel", type=kernel_option, default="rbf", metavar="KERNEL",
        help=f"exact kernel: {', '.join(EXACT_KERNELS)}, or a composite spec such as 'rbf[0:3]*matern52[3:6]+linear' "
        "(products, sums, column ranges, linear, polyP, additive(k); approximated part by part by "
        "gprf.random_features with each Fourier method's sampler); default: rbf",
    )  # fmt: skip
    model.add_argument(
        "--subsample",
        type=positive_int,
        metavar="N",
        default=1000,
        help="training rows used to fit the hyperparameters (default: 1000)",
    )
    model.add_argument("--optimizer", choices=("adam", "lbfgs"), default="adam", help="default: adam")
    model.add_argument(
        "--fit-iters",
        type=positive_int,
        metavar="N",
        default=100,
        help="Adam steps, or L-BFGS function evaluations (default: 100)",
    )
    model.add_argument(
        "--lr", type=positive_float, metavar="RATE", default=0.1, help="Adam learning rate (default: 0.1)"
    )
    approx = parser.add_argument_group("approximations")
    approx.add_argument(
        "--methods",
        metavar="M1,M2,...",
        help=f"comma-separated methods (default: all that approximate --kernel: {', '.join(APPROXIMATIONS)})",
    )
    approx.add_argument(
        "--features", type=positive_int, default=256, metavar="F", help="features per method (default: 256)"
    )
    approx.add_argument(
        "--repeats", type=positive_int, metavar="R", default=1, help="feature draws per method, averaged (default: 1)"
    )
    approx.add_argument(
        "--kernel-points",
        type=positive_int,
        metavar="N",
        default=1000,
        help="training points on which the kernel-matrix error is measured (default: 1000)",
    )
    out = parser.add_argument_group("run and output")
    out.add_argument(
        "--seed", type=non_negative_int, metavar="S", default=0, help="seed of the split and feature draws (default: 0)"
    )
    add_device_arguments(out)
    out.add_argument("--plot", metavar="OUT.png", help="bar chart of KL and relative Frobenius error per method")
    out.add_argument("--json", metavar="OUT.json", help="write the results as JSON")
    out.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.set_defaults(run=run, error=parser.error)
    return parser


def kernel_option(text: str) -> str:
    """argparse type of ``--kernel``: a single kernel's name, or a composite spec whose syntax is checked here (its
    columns are checked against the data once it is loaded)."""
    text = text.strip()
    if text in EXACT_KERNELS:
        return text
    if not is_composite_spec(text):
        raise argparse.ArgumentTypeError(
            f"unknown kernel {text!r}; use one of {', '.join(EXACT_KERNELS)} or a composite spec such as "
            "'rbf[0:3]*matern52[3:6]+linear'"
        )
    try:
        read_kernel_spec(text)  # the syntax only: its columns are checked once the data is loaded
    except KernelSpecError as error:
        raise argparse.ArgumentTypeError(error.detail) from None
    return text


def parse_methods(text: str | None, kernel: str, num_features: int) -> list[str]:
    """The ``--methods`` list, validated against the registry, ``--kernel`` and ``--features``."""
    if text is None:
        names = methods_for_kernel(kernel)
        if not names:
            raise CLIError(f"argument --methods: no registered method approximates --kernel {kernel}")
    else:
        names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
        if not names:
            raise CLIError(f"argument --methods: empty list; valid methods: {', '.join(APPROXIMATIONS)}")
        unknown = [name for name in names if name not in APPROXIMATIONS]
        if unknown:
            raise CLIError(
                f"argument --methods: unknown method(s) {', '.join(map(repr, unknown))}; "
                f"valid methods: {', '.join(APPROXIMATIONS)}"
            )
        unsupported = [name for name in names if kernel_family(kernel) not in APPROXIMATIONS[name].kernels]
        if unsupported:
            raise CLIError(
                f"argument --methods: {', '.join(map(repr, unsupported))} cannot approximate --kernel {kernel}; "
                f"methods for {kernel}: {', '.join(methods_for_kernel(kernel)) or 'none'}"
            )
    for name in names:
        problem = APPROXIMATIONS[name].check_num_features(num_features)
        if problem:
            raise CLIError(f"argument --features: {name}: {problem}")
    return names


@dataclass
class MethodResult:
    """Per-draw metrics of one method (lists over repeats)."""

    name: str
    num_features: int | None = None
    draws: dict[str, list[float]] = field(default_factory=lambda: {key: [] for key in METRICS})

    def mean(self, key: str) -> float | None:
        values = self.draws[key]
        return statistics.fmean(values) if values else None

    def std(self, key: str) -> float | None:
        values = self.draws[key]
        return statistics.stdev(values) if len(values) > 1 else None

    def to_dict(self) -> dict:
        return {
            "method": self.name,
            "num_features": self.num_features,
            "mean": {key: self.mean(key) for key in METRICS},
            "std": {key: self.std(key) for key in METRICS},
            "draws": self.draws,
        }


@dataclass
class CompareReport:
    """Everything ``compare`` measured: run metadata (JSON-ready) and the per-method results, exact first."""

    meta: dict
    results: list[MethodResult]

    def to_dict(self) -> dict:
        return {**self.meta, "results": [result.to_dict() for result in self.results]}


@dataclass(frozen=True)
class _RunContext:
    """What every step of one run needs: the parsed and validated options, and where progress lines go."""

    args: argparse.Namespace
    device: torch.device
    dtype: torch.dtype
    methods: list[str]
    log: Progress


@dataclass(frozen=True)
class _HyperparameterFit:
    """The exact GP's hyperparameters, fitted by marginal likelihood on a subsample, and how that fit went."""

    hyper: Hyperparameters
    num_rows: int
    final_loss: float
    seconds: float


@dataclass(frozen=True)
class _ExactReference:
    """The conditioned exact GP that every approximation is measured against.

    Attributes:
        split: The standardised train/test data every model uses.
        hyper: The fitted hyperparameters every model reuses.
        mean, var: The exact noisy predictive marginals of the test rows.
        kernel_x: The training rows on which the kernel-matrix error is measured.
        kernel_matrix: The dense exact kernel matrix on ``kernel_x`` (outputscale included, no noise).
        result: The exact GP's own row of the report.
    """

    split: Split
    hyper: Hyperparameters
    mean: torch.Tensor
    var: torch.Tensor
    kernel_x: torch.Tensor
    kernel_matrix: torch.Tensor
    result: MethodResult


def _condition_and_predict(model: RegressionGP, test_x: torch.Tensor, device: torch.device):
    """Times of conditioning (first prediction at one point builds the caches) and of predicting the test set."""

    def condition() -> None:
        predict(model, test_x[:1])

    _, condition_s = timed(condition, device)
    (mean, var), predict_s = timed(lambda: predict(model, test_x), device)
    return mean, var, condition_s, predict_s


def _score(result: MethodResult, mean, var, split: Split, exact_mean, exact_var) -> None:
    """Appends the test-set metrics of one prediction to ``result.draws`` (KL only when an exact one is given)."""
    draws = result.draws
    if exact_mean is not None:
        draws["kl"].append(gaussian_kl(mean, var, exact_mean, exact_var).item())
    draws["rmse"].append((mean - split.test_y).square().mean().sqrt().item())
    draws["nmse"].append(nmse(mean, split.test_y).item())
    draws["mnll"].append(mnll(mean, var, split.test_y).item())


def _validate_options(args: argparse.Namespace, log: Progress) -> _RunContext:
    """Resolves device, dtype and threads and validates ``--methods``, ``--json`` and ``--plot``.

    Returns the run's context; raises :class:`CLIError` on a bad option, before any data is loaded.
    """
    device = resolve_device(args.device)
    dtype = DTYPES[args.dtype]
    apply_threads(args.threads)
    methods = parse_methods(args.methods, args.kernel, args.features)
    check_output_path(args.json, "--json")
    check_output_path(args.plot, "--plot")
    if args.plot:
        require_matplotlib("--plot")
    return _RunContext(args, device, dtype, methods, log)


def _load_and_split(ctx: _RunContext) -> tuple[Dataset, Split]:
    """Loads ``--data`` and returns it with its seeded, standardised train/test split on the run's device."""
    args, log = ctx.args, ctx.log
    data = load_dataset(args.data, args.target)
    log(f"loaded {data.name}: {data.num_rows} rows, {data.num_inputs} inputs, target {data.target_name!r}")
    for note in data.notes:
        log(f"note: {note}")
    split = split_dataset(data, args.test_fraction, args.seed, args.max_train, ctx.device, ctx.dtype)
    log(f"split: {split.train_x.size(0)} train / {split.test_x.size(0)} test rows (seed {args.seed}), standardised")
    return data, split


def _fit_exact_hyperparameters(ctx: _RunContext, split: Split) -> _HyperparameterFit:
    """Fits the exact GP's hyperparameters on the first ``--subsample`` training rows.

    Returns the fitted values with the number of rows, the final loss (-MLL/N) and the seconds the fit took.
    """
    args = ctx.args
    num_train, num_dims = split.train_x.shape
    num_fit = min(args.subsample, num_train)
    try:
        kernel = exact_kernel(args.kernel, num_dims)
    except ValueError as error:  # a composite spec's columns beyond the data's
        raise CLIError(f"argument {error}") from None
    model = RegressionGP(split.train_x[:num_fit], split.train_y[:num_fit], kernel)
    initialize_hyperparameters(model, lengthscale=math.sqrt(num_dims))
    ctx.log(f"fitting exact GP hyperparameters on {num_fit} rows ({args.fit_iters} {args.optimizer} iterations)")
    final_loss, seconds = _optimize_hyperparameters(ctx, model)
    hyper = get_hyperparameters(model)
    if is_composite_spec(args.kernel):  # the parts' fitted values travel with a copy of the expression
        hyper = dataclasses.replace(hyper, expression=copy.deepcopy(model.covar_module.base_kernel))
    _check_fit_is_finite(hyper, final_loss)
    ctx.log(f"  done in {seconds:.2f} s, -MLL/N = {final_loss:.4f}: {hyper.describe()}")
    return _HyperparameterFit(hyper, num_fit, final_loss, seconds)


def _fit_progress(ctx: _RunContext) -> Callable[[int, float], None]:
    """The optimiser's per-step callback: logs the loss at every quarter of ``--fit-iters`` and at the last step."""
    num_iters = ctx.args.fit_iters
    report_every = max(1, num_iters // 4)

    def on_step(step: int, loss: float) -> None:
        if (step + 1) % report_every == 0 or step + 1 == num_iters:
            ctx.log(f"  step {step + 1}/{num_iters}: -MLL/N = {loss:.4f}")

    return on_step


def _optimize_hyperparameters(ctx: _RunContext, model: RegressionGP) -> tuple[float, float]:
    """Runs the ``--optimizer`` fit of ``model`` in place; returns the final loss (-MLL/N) and its seconds."""
    args = ctx.args
    on_step = _fit_progress(ctx)
    try:
        return timed(lambda: fit_hyperparameters(model, args.fit_iters, args.lr, args.optimizer, on_step), ctx.device)
    except (NotPSDError, NanError) as err:
        raise _numerical_failure(ctx, "the hyperparameter fit", err, "--optimizer adam, a smaller --lr") from None


def _numerical_failure(ctx: _RunContext, step: str, error: Exception, options: str = "") -> CLIError:
    """The :class:`CLIError` of a failed Cholesky factorisation or NaN deep inside GPyTorch (meaningless to a CLI
    user as it is), naming the options that usually help."""
    return CLIError(
        f"{step} failed ({type(error).__name__}) with --kernel {ctx.args.kernel} in {ctx.args.dtype}; try "
        f"{_kernel_advice(ctx)}{', ' + options if options else ''}"
    )


def _kernel_advice(ctx: _RunContext) -> str:
    """What to change when the kernel's values are too large or too ill-conditioned for the run's dtype."""
    advice = "--dtype float64" if ctx.dtype != torch.float64 else ""
    if "poly" in ctx.args.kernel:  # (x.x' + c)^P spans many orders of magnitude at high degree P
        advice = f"{advice + ', ' if advice else ''}a lower degree P of polyP"
    return advice or "another --kernel"


def _check_fit_is_finite(hyper: Hyperparameters, final_loss: float) -> None:
    """Raises :class:`CLIError` if the fit diverged to non-finite hyperparameters or loss."""
    values = [hyper.outputscale, hyper.noise, hyper.mean_constant]
    if hyper.lengthscale is not None:
        values.append(hyper.lengthscale)
    if not all(bool(torch.isfinite(t).all()) for t in values) or not math.isfinite(final_loss):
        raise CLIError("the hyperparameter fit diverged (non-finite values); try --optimizer adam or a smaller --lr")


def _condition_exact_reference(ctx: _RunContext, split: Split, hyper: Hyperparameters) -> _ExactReference:
    """Conditions the exact GP on every training row with ``hyper`` and predicts the test set.

    Returns the reference: its predictive marginals, its kernel matrix on the first ``--kernel-points``
    training rows and its scored report row (fit and predict times included).
    """
    num_train, num_dims = split.train_x.shape
    kernel_x = split.train_x[: min(ctx.args.kernel_points, num_train)]
    try:
        model = RegressionGP(split.train_x, split.train_y, _exact_base_kernel(ctx.args.kernel, num_dims, hyper))
        set_hyperparameters(model, hyper)
        ctx.log(f"conditioning the exact GP on {num_train} rows and predicting {split.test_x.size(0)} test points")
        mean, var, fit_s, predict_s = _condition_and_predict(model, split.test_x, ctx.device)
        with torch.no_grad():
            kernel_matrix = model.covar_module(kernel_x).to_dense()
    except torch.cuda.OutOfMemoryError:
        raise CLIError(f"the exact GP on {num_train} rows does not fit in GPU memory; lower --max-train") from None
    except (NotPSDError, NanError) as err:
        raise _numerical_failure(ctx, f"conditioning the exact GP on {num_train} rows", err) from None
    _check_reference(ctx, mean, var, kernel_matrix)
    result = MethodResult("exact")
    _score(result, mean, var, split, None, None)
    result.draws["fit_s"].append(fit_s)
    result.draws["predict_s"].append(predict_s)
    return _ExactReference(split, hyper, mean, var, kernel_x, kernel_matrix, result)


def _check_reference(ctx: _RunContext, mean: torch.Tensor, var: torch.Tensor, kernel_matrix: torch.Tensor) -> None:
    """Raises :class:`CLIError` unless the exact predictive is finite and the exact kernel matrix has a finite,
    non-zero Frobenius norm in the run's dtype: every method is measured against them."""
    norm = torch.linalg.matrix_norm(kernel_matrix)
    if not (torch.isfinite(mean).all() and torch.isfinite(var).all() and torch.isfinite(norm) and norm > 0):
        raise CLIError(
            f"argument --kernel: the exact GP with --kernel {ctx.args.kernel} is not finite in {ctx.args.dtype} on "
            f"this data (its {kernel_matrix.size(0)} x {kernel_matrix.size(0)} kernel matrix has Frobenius norm "
            f"{norm.item():.3g}, largest entry {kernel_matrix.abs().max().item():.3g}), so no approximation can be "
            f"measured against it; try {_kernel_advice(ctx)}"
        )


def _exact_base_kernel(kernel: str, num_dims: int, hyper: Hyperparameters):
    """The exact base kernel with the fitted values: a copy of the fitted expression for composite specs."""
    return copy.deepcopy(hyper.expression) if hyper.expression is not None else exact_kernel(kernel, num_dims)


def _feature_seeds(args: argparse.Namespace) -> list[int]:
    """One feature seed per ``--repeats`` draw, derived from ``--seed``; every method reuses the same seeds."""
    generator = torch.Generator().manual_seed(args.seed)
    return torch.randint(2**31 - 1, (args.repeats,), generator=generator).tolist()


def _evaluate_approximations(ctx: _RunContext, reference: _ExactReference) -> list[MethodResult]:
    """Evaluates every ``--methods`` entry over the feature draws; returns their results in that order."""
    feature_seeds = _feature_seeds(ctx.args)
    results = []
    for index, name in enumerate(ctx.methods, start=1):
        result = MethodResult(name)
        for repeat, feature_seed in enumerate(feature_seeds, start=1):
            _evaluate_draw(ctx, reference, result, feature_seed)
            ctx.log(
                f"{name} ({index}/{len(ctx.methods)}) draw {repeat}/{ctx.args.repeats}: "
                f"rel.Frob {result.draws['frobenius'][-1]:.4g}, KL {result.draws['kl'][-1]:.4g}"
            )
        results.append(result)
    return results


def _evaluate_draw(ctx: _RunContext, reference: _ExactReference, result: MethodResult, feature_seed: int) -> None:
    """Builds method ``result.name`` with one feature draw, conditions it and scores it against ``reference``.

    Appends the draw's metrics and times to ``result.draws`` and records its number of features.
    """
    approximation = APPROXIMATIONS[result.name]
    request = _approximation_request(ctx.args, reference, feature_seed)
    model, build_s = timed(lambda: _approximate_model(approximation, request, reference), ctx.device)
    try:
        mean, var, condition_s, predict_s = _condition_and_predict(model, reference.split.test_x, ctx.device)
    except (NotPSDError, NanError) as err:
        step = f"conditioning method {result.name} (--features {ctx.args.features})"
        raise _numerical_failure(ctx, step, err) from None
    with torch.no_grad():
        error = relative_frobenius_error(model.covar_module(reference.kernel_x), reference.kernel_matrix)
    result.draws["frobenius"].append(error.item())
    _score(result, mean, var, reference.split, reference.mean, reference.var)
    result.draws["fit_s"].append(build_s + condition_s)
    result.draws["predict_s"].append(predict_s)
    base = model.covar_module.base_kernel
    result.num_features = getattr(base, "num_features", base.root_dim)  # composites: their root's width


def _approximation_request(
    args: argparse.Namespace, reference: _ExactReference, feature_seed: int
) -> ApproximationRequest:
    """What an approximation's factory needs for one draw: sizes, kernel, seed, training rows and lengthscale."""
    return ApproximationRequest(
        num_features=args.features,
        num_dims=reference.split.train_x.size(1),
        kernel=args.kernel,
        seed=feature_seed,
        train_x=reference.split.train_x,
        lengthscale=reference.hyper.lengthscale,
        expression=copy.deepcopy(reference.hyper.expression) if reference.hyper.expression is not None else None,
    )


def _approximate_model(
    approximation: Approximation, request: ApproximationRequest, reference: _ExactReference
) -> RegressionGP:
    """The random-feature GP on the training rows, with the exact GP's hyperparameters copied in."""
    split = reference.split
    model = RegressionGP(split.train_x, split.train_y, approximation.build(request))
    set_hyperparameters(model, reference.hyper)
    return model


def _report_meta(ctx: _RunContext, data: Dataset, fit: _HyperparameterFit, reference: _ExactReference) -> dict:
    """The JSON-ready run metadata of the report: dataset, configuration and fitted hyperparameters."""
    return {
        "command": "compare",
        "dataset": _dataset_meta(data, reference.split),
        "config": _config_meta(ctx, num_kernel_points=reference.kernel_x.size(0)),
        "hyperparameters": _hyperparameters_meta(ctx.args, fit),
    }


def _dataset_meta(data: Dataset, split: Split) -> dict:
    """The dataset's name, size, columns and notes, with the sizes of the split and the target's scale."""
    return {
        "name": data.name,
        "rows": data.num_rows,
        "inputs": list(data.input_names),
        "target": data.target_name,
        "notes": list(data.notes),
        "num_train": split.train_x.size(0),
        "num_test": split.test_x.size(0),
        "target_std": split.y_std,
    }


def _config_meta(ctx: _RunContext, num_kernel_points: int) -> dict:
    """The options that shaped the comparison (kernel, features, methods, draws, seed, device, dtype)."""
    args = ctx.args
    return {
        "kernel": args.kernel,
        "features": args.features,
        "methods": ctx.methods,
        "repeats": args.repeats,
        "seed": args.seed,
        "device": str(ctx.device),
        "dtype": args.dtype,
        "kernel_points": num_kernel_points,
    }


def _hyperparameters_meta(args: argparse.Namespace, fit: _HyperparameterFit) -> dict:
    """How the exact GP's hyperparameters were fitted and their values, as plain numbers."""
    hyper = fit.hyper
    return {
        "fit_rows": fit.num_rows,
        "optimizer": args.optimizer,
        "iterations": args.fit_iters,
        "fit_seconds": fit.seconds,
        "final_loss": fit.final_loss,
        "mean_constant": hyper.mean_constant.item(),
        "outputscale": hyper.outputscale.item(),
        "lengthscale": hyper.lengthscale.flatten().tolist() if hyper.lengthscale is not None else None,
        "noise": hyper.noise.flatten()[0].item(),
    }


def run_compare(args: argparse.Namespace, log: Progress) -> CompareReport:
    """Run the comparison described by parsed ``args``; returns its report, the exact GP's row first."""
    ctx = _validate_options(args, log)
    data, split = _load_and_split(ctx)
    fit = _fit_exact_hyperparameters(ctx, split)
    reference = _condition_exact_reference(ctx, split, fit.hyper)
    results = _evaluate_approximations(ctx, reference)
    return CompareReport(_report_meta(ctx, data, fit, reference), [reference.result, *results])


def render_report(report: CompareReport) -> str:
    """The plain-text report: a header, the table, and what each column means."""
    ds, cfg, hp = report.meta["dataset"], report.meta["config"], report.meta["hyperparameters"]
    repeats = cfg["repeats"]
    with_std = repeats > 1

    def cell(result: MethodResult, key: str, seconds: bool = False) -> str:
        mean = result.mean(key)
        text = format_seconds(mean) if seconds else format_number(mean)
        std = result.std(key)
        if with_std and std is not None and key in ("frobenius", "kl"):
            text += f" +- {format_number(std, 2)}"
        return text

    headers = ["method", "F", "rel.Frob", "KL/point", "RMSE", "NMSE", "MNLL", "fit s", "predict s"]
    rows = []
    for result in report.results:
        rows.append(
            [
                result.name,
                str(result.num_features) if result.num_features is not None else "-",
                cell(result, "frobenius"),
                cell(result, "kl"),
                cell(result, "rmse"),
                cell(result, "nmse"),
                cell(result, "mnll"),
                cell(result, "fit_s", seconds=True),
                cell(result, "predict_s", seconds=True),
            ]
        )
    header = [
        f"gprf compare: {ds['name']}, {ds['rows']} rows x {len(ds['inputs'])} inputs, target {ds['target']!r}",
        f"split: {ds['num_train']} train / {ds['num_test']} test rows (seed {cfg['seed']}); inputs and target "
        "standardised with training statistics",
        f"exact GP: ScaleKernel({cfg['kernel']}, ARD) + ConstantMean + GaussianLikelihood; hyperparameters fitted "
        f"on {hp['fit_rows']} rows ({hp['iterations']} {hp['optimizer']} iterations, {hp['fit_seconds']:.2f} s, "
        f"-MLL/N {hp['final_loss']:.4f}); every method reuses them",
        f"features F = {cfg['features']}, {repeats} draw(s) per method"
        + (" (mean +- std over draws)" if with_std else "")
        + f", {cfg['dtype']} on {cfg['device']}",
        "",
    ]
    footer = [
        "",
        f"rel.Frob : ||K_approx - K||_F / ||K||_F on {cfg['kernel_points']} training points "
        "(outputscale included, no noise)",
        f"KL/point : KL(approx || exact) of the noisy predictive marginals, mean over the {ds['num_test']} test points",
        f"RMSE, NMSE, MNLL: noisy predictive on the standardised test target (target std {ds['target_std']:.4g})",
        "fit s    : draw features + condition on the training rows (exact: Cholesky); "
        "predict s: predictive mean + variance of the test points",
    ]
    footer = [textwrap.fill(note, width=110, subsequent_indent=" " * 11) for note in footer]
    return "\n".join(header + [format_table(headers, rows)] + footer)


def plot_report(report: CompareReport, path: str) -> None:
    """Write :func:`report_figure` to ``path`` (PNG, 120 dpi)."""
    report_figure(report).savefig(path, dpi=120)


def report_figure(report: CompareReport) -> Figure:
    """Bar charts of the mean KL per test point and of the relative Frobenius error per method.

    The bars are horizontal: method names (``maclaurin-srht-complex`` and the like) sit one per row on the shared
    vertical axis, where they cannot run into each other however many methods are compared. A bare
    :class:`~matplotlib.figure.Figure` on an Agg canvas: no ``pyplot``, no global backend switch."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    results = report.results[1:]
    cfg = report.meta["config"]
    names = [r.name for r in results]
    # About a third of an inch per method row, plus the title, the value axis and its label.
    figure = Figure(figsize=(8.0, 1.4 + 0.35 * len(names)), layout="constrained")
    FigureCanvasAgg(figure)  # attaches itself to the figure
    for axis, key, label in zip(
        figure.subplots(1, 2, sharey=True),
        ("kl", "frobenius"),
        ("KL(approx || exact) per test point", "relative Frobenius error of K"),
        strict=True,
    ):
        means = [r.mean(key) for r in results]
        stds = [r.std(key) or 0.0 for r in results]
        bars = axis.barh(names, means, xerr=stds if cfg["repeats"] > 1 else None, capsize=3, color="tab:blue")
        axis.bar_label(bars, labels=[format_number(m, 3) for m in means], padding=3, fontsize=8)
        axis.set_xlabel(label, fontsize=9)
        axis.margins(x=0.25)  # room right of the longest bar for its value label
        axis.set_xlim(left=0)
        axis.grid(axis="x", alpha=0.3)
    axis.invert_yaxis()  # the methods top to bottom in the report's order (one call: the y axis is shared)
    figure.suptitle(f"{report.meta['dataset']['name']}: {cfg['kernel']} kernel, F = {cfg['features']}", fontsize=10)
    return figure


def run(args: argparse.Namespace) -> int:
    log = Progress("compare", enabled=not args.quiet)
    report = run_compare(args, log)
    print(render_report(report))
    if args.plot:
        plot_report(report, args.plot)
        log(f"wrote {args.plot}")
    if args.json:
        write_json(args.json, report.to_dict())
        log(f"wrote {args.json}")
    return 0
