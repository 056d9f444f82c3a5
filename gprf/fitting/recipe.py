r"""``fit_mll``: one call that fits a random-feature GP's hyperparameters for accuracy per second.

Gradient steps of the marginal likelihood cost :math:`O(NF^2 + F^3)` each, so at the feature counts that make a
random-feature GP accurate (thousands) only a handful fit in a minute. The recipe spends those seconds where they
matter:

1. **tune** the lengthscales (and everything else) by Adam on a seeded row subsample with a small nested prefix of
   the model's own feature draw (:meth:`~gprf.kernels.FeatureMapOwner.features_resized`), each step
   :math:`(N/n)(F/F_{\text{tune}})^2` times cheaper than a full step;
2. **grow** back to the model's full draw (the small map was its prefix, so the tuned lengthscales suit it) and
   **refit the scale hyperparameters exactly** — outputscale, noise and constant mean at the maximum of the full-data,
   full-:math:`F` marginal likelihood (:func:`~gprf.fitting.fit_scale_hyperparameters`, one :math:`F\times F`
   eigendecomposition). The noise a small-:math:`F` model learns absorbs its approximation error and is too large;
   this step removes that bias;
3. optionally **finish** with L-BFGS steps of the full marginal likelihood.

Small problems (at most ``tune_rows`` points and ``tune_features`` features) skip the subsample and the nesting:
L-BFGS runs on the full marginal likelihood, followed by the exact scale refit.
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass

import torch
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP

from gprf._checks import check_training_inputs
from gprf.fitting.end_point import end_where_predictable, parameter_values
from gprf.fitting.exact_route import ExactSteps, fit_exact_mll, holds_preconditioned_kernel
from gprf.fitting.fit_arguments import (
    check_callback,
    check_count,
    check_flag,
    check_learning_rate,
    check_positive_seconds,
    resolve_seed,
)
from gprf.fitting.row_subsample import subsample_rows, training_rows
from gprf.fitting.scale_fit import fit_scale_hyperparameters, supports_exact_scale_fit
from gprf.kernels.feature_kernel import FeatureKernel
from gprf.kernels.feature_map_owner import FeatureMapOwner

#: The exact refit's cost in float64 multiply-adds, in units of N F^2 (the Gram) and F^3 (tridiagonalisation at
#: memory-bound speed, its reflectors and the eigenvectors of the tridiagonal matrix).
REFIT_GRAM_COST, REFIT_SPECTRAL_COST = 1.0, 2.0


@dataclass
class _Clock:
    """Wall clock of the fit that stops while the user's callback runs (so callbacks can evaluate models)."""

    budget: float | None
    callback: Callable[[str, float], None] | None
    start: float = 0.0
    paused: float = 0.0

    def __post_init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start - self.paused

    def left(self) -> float:
        return math.inf if self.budget is None else self.budget - self.elapsed

    def checkpoint(self, stage: str) -> None:
        if self.callback is not None:
            begin = time.perf_counter()
            self.callback(stage, self.elapsed)
            self.paused += time.perf_counter() - begin


def fit_mll(
    mll: ExactMarginalLogLikelihood,
    *,
    time_budget: float | None = None,
    tune_features: int | None = 512,
    tune_rows: int | None = 4096,
    tune_steps: int = 100,
    lr: float = 0.1,
    finish_steps: int | None = None,
    seed: int | None = 0,
    progress: bool = False,
    callback: Callable[[str, float], None] | None = None,
) -> ExactMarginalLogLikelihood:
    r"""Fit the hyperparameters of a GP with gprf feature kernels: nested small-:math:`F` tuning, exact scale refit.

    The recipe (see :mod:`gprf.fitting.recipe`): Adam on the lengthscales and the other hyperparameters with the first
    ``tune_features`` features of each feature kernel's draw on ``tune_rows`` seeded rows; then the model's full draw
    on all rows with the outputscale, noise and constant mean refitted exactly; then ``finish_steps`` L-BFGS
    iterations on the full marginal likelihood. Like BoTorch's ``fit_gpytorch_mll`` it returns ``mll`` in eval mode;
    :class:`~gprf.botorch.RandomFeatureSingleTaskGP` calls it from ``fit_gpytorch_mll``.

    When to use it: training sets of thousands of points or more, and feature counts of a few thousand, where
    full-size gradient steps are too slow to converge in the time you have. Plain Adam or L-BFGS on the full marginal
    likelihood is enough (and what this does for small problems) when a full step takes well under a second.

    Args:
        mll: GPyTorch's ``ExactMarginalLogLikelihood`` of an ``ExactGP`` whose covariance is a gprf feature kernel
            (alone, in ``ScaleKernel``, or in sums of them).
        time_budget: Wall-clock seconds for the whole fit (``None``: no limit). Tuning stops when what is left
            is the estimated time of the exact refit (from a float64 GEMM timed at the start); the refit always
            runs; finishing steps run while time is left.
        tune_features: Features of the tuning stage (a prefix of each kernel's draw), at least 1; ``None`` or a
            number at least the model's keeps the full draw.
        tune_rows: Rows of the seeded subsample of the tuning stage, at least 1; ``None`` uses every row. The
            subsample carries its rows' observed noise (``FixedNoiseGaussianLikelihood``, BoTorch's
            ``train_Yvar``, Dirichlet classification), restored with the full data after tuning.
        tune_steps: Adam steps of the tuning stage.
        lr: Adam learning rate.
        finish_steps: L-BFGS iterations on the full marginal likelihood at the end, while the time budget lasts
            (an evaluation starts only when the time left covers the longest one so far; the best point evaluated
            is kept); ``None``: 100 for small problems (no subsample and no nesting), 0 otherwise (a full-size
            evaluation costs about as much as the exact refit, so a budget that leaves room for a few of them
            gains little; measured in the regression benchmark's documentation).
        seed: Seed of the row subsample, an integer in :math:`[0, 2^{63})`; ``None`` derives one from torch's
            global generator state without advancing it (so ``torch.manual_seed`` makes the fit repeatable).
        progress: Print each stage and its marginal likelihood to stderr.
        callback: ``callback(stage, seconds)`` after every tuning step and stage; the time it takes is not counted
            in ``time_budget`` (use it to evaluate checkpoints).

    Returns:
        ``mll``, in eval mode, at hyperparameters where the model's prediction cache factors (checked by building
        it once). When the model cannot predict at the point the fit ends at (its capacitance does not factor
        numerically), the hyperparameters are set back to the last stage where it can, with a
        :class:`~gprf.exceptions.FitFallbackWarning` (:mod:`gprf.fitting.end_point`).

    Raises:
        TypeError: An option of the wrong type (each message names the option).
        ValueError: An option out of range (e.g. ``tune_rows=0``, a negative ``tune_steps``).
        NotPSDError: The model cannot predict at any point of the fit, its start included (the message says why).

    Example:
        >>> mll = ExactMarginalLogLikelihood(model.likelihood, model)
        >>> gprf.fit_mll(mll, time_budget=60.0, progress=True)
    """
    model = _check_mll(mll)
    time_budget = check_positive_seconds(time_budget, "time_budget")
    tune_features = check_count(tune_features, "tune_features", minimum=1, optional=True, meaning="features")
    tune_rows = check_count(tune_rows, "tune_rows", minimum=1, optional=True, meaning="rows of the subsample")
    tune_steps = check_count(tune_steps, "tune_steps", minimum=0, optional=False, meaning="Adam steps")
    lr = check_learning_rate(lr)
    finish_steps = check_count(finish_steps, "finish_steps", minimum=0, optional=True, meaning="L-BFGS iterations")
    seed = resolve_seed(seed)
    progress = check_flag(progress, "progress")
    callback = check_callback(callback)
    if holds_preconditioned_kernel(model):  # an exact GP: tuned through its random features, then exact steps
        tuning = dict(tune_features=tune_features, tune_rows=tune_rows, tune_steps=tune_steps, seed=seed)
        surrogate = functools.partial(fit_mll, **tuning, lr=lr, progress=progress)
        steps = ExactSteps(_Clock(time_budget, callback), _reporter(progress), _loss, _project_onto_bounds)
        return fit_exact_mll(mll, surrogate, steps, lr=lr, finish_steps=finish_steps)
    clock = _Clock(time_budget, callback)
    report = _reporter(progress)
    num_rows = model.train_targets.size(-1)
    nested = _nested_kernels(model, tune_features)
    subsample = tune_rows is not None and num_rows > tune_rows
    small = not nested and not subsample
    exact_scale_fit = supports_exact_scale_fit(mll)  # the likelihood and kernel types do not change during the fit
    if finish_steps is None:
        finish_steps = 100 if small else 0

    mll.train()
    checkpoints = [("the start", parameter_values(mll))]
    reserve = 0.0 if time_budget is None or small else _refit_seconds(model)
    if reserve:
        report(f"keeping {reserve:.1f} s of the budget for the full-size refit (estimated)", None)
    if not small and tune_steps > 0:
        rows = subsample_rows(num_rows, tune_rows if subsample else num_rows, seed, model.train_targets.device)
        with ExitStack() as stack:
            for kernel in nested:
                stack.enter_context(kernel.features_resized(tune_features))
            stack.enter_context(training_rows(model, mll.likelihood, rows))
            sizes = f"{rows.numel()} rows, F = {tune_features if nested else 'full'}"
            _adam(mll, tune_steps, lr, clock, reserve, lambda step, loss: report(f"tune {step} ({sizes})", loss))
        checkpoints.append(("tuning", parameter_values(mll)))
    clock.checkpoint("tune")

    if exact_scale_fit:
        result = fit_scale_hyperparameters(mll)
        report("scale refit (full data, full F)", None, detail=str(result))
        checkpoints.append(("the scale refit", parameter_values(mll)))
        clock.checkpoint("scale")
    if finish_steps > 0 and clock.left() > 0:
        _lbfgs(mll, finish_steps, clock, reserve, lambda loss: report("finish (L-BFGS, full data, full F)", loss))
        if exact_scale_fit and clock.left() >= reserve:
            checkpoints.append(("the finishing L-BFGS", parameter_values(mll)))
            fit_scale_hyperparameters(mll)
        clock.checkpoint("finish")
    end_where_predictable(mll, checkpoints)
    report(f"done in {clock.elapsed:.1f} s", None)
    return mll


def _check_mll(mll: object) -> ExactGP:
    if not isinstance(mll, ExactMarginalLogLikelihood) or not isinstance(mll.model, ExactGP):
        raise TypeError(
            f"fit_mll takes gpytorch.mlls.ExactMarginalLogLikelihood of an ExactGP, got {type(mll).__name__}; "
            "fit other objectives with a torch optimizer."
        )
    if mll.model.train_inputs is None:
        raise ValueError("fit_mll: the model has no training data (model.set_train_data first).")
    check_training_inputs(mll.model.train_inputs)
    return mll.model


def _nested_kernels(model: ExactGP, tune_features: int | None) -> list[FeatureMapOwner]:
    """The model's feature kernels with more than ``tune_features`` features whose draws can be nested: every
    feature-map owner except those inside a kernel whose parts keep their draws
    (:meth:`~gprf.kernels.FeatureKernel.part_draws_nest`, e.g. the factors of products), and maps without prefixes."""
    if tune_features is None:
        return []
    kept_whole = {
        id(module)
        for kernel in model.covar_module.modules()
        if isinstance(kernel, FeatureKernel) and not kernel.part_draws_nest()
        for module in kernel.modules()
    }
    kernels = []
    for module in _feature_kernels(model):
        if module.num_features > tune_features and id(module) not in kept_whole:
            try:
                module.feature_map.resized(tune_features)
            except NotImplementedError:
                continue  # a draw without prefixes (e.g. a quadrature rule): tune at its full size
            kernels.append(module)
    return kernels


def _project_onto_bounds(mll: ExactMarginalLogLikelihood) -> None:
    """Clip raw parameters whose constraint has no transform (BoTorch's: bounds kept by its optimiser) into bounds."""
    with torch.no_grad():
        for _, parameter, constraint in mll.named_parameters_and_constraints():
            if constraint is not None and not constraint.enforced:
                lower = constraint.lower_bound.to(parameter)
                upper = constraint.upper_bound.to(parameter)
                parameter.copy_(torch.maximum(torch.minimum(parameter, upper), lower))


def _loss(mll: ExactMarginalLogLikelihood) -> torch.Tensor:
    _project_onto_bounds(mll)
    model = mll.model
    output = model(*model.train_inputs)
    return -mll(output, model.train_targets).sum()


def _adam(
    mll: ExactMarginalLogLikelihood,
    steps: int,
    lr: float,
    clock: _Clock,
    reserve: float,
    report: Callable[[int, torch.Tensor], None],
) -> None:
    optimizer = torch.optim.Adam(mll.parameters(), lr=lr)
    limit = None if clock.budget is None else clock.budget - reserve
    for step in range(1, steps + 1):
        optimizer.zero_grad(set_to_none=True)
        loss = _loss(mll)
        loss.backward()
        optimizer.step()
        _project_onto_bounds(mll)
        if step == 1 or step == steps or step % 10 == 0:
            report(step, loss)
        clock.checkpoint(f"tune {step}")
        if limit is not None and clock.elapsed >= limit:
            report(step, loss)
            break


class _OutOfTime(Exception):
    """Raised inside the L-BFGS closure when the next evaluation would not finish within the time budget."""


class _InvalidTrialPoint(Exception):
    """Raised inside the L-BFGS closure at a trial point where the model cannot be evaluated."""


def _lbfgs(
    mll: ExactMarginalLogLikelihood,
    steps: int,
    clock: _Clock,
    estimate: float,
    report: Callable[[torch.Tensor], None],
) -> None:
    """L-BFGS iterations on the full marginal likelihood within the budget; the best point evaluated is kept.

    An evaluation starts only when the time left covers the longest one so far (``estimate`` before the first), so
    the budget is overshot by at most one evaluation's time misjudged. A line search stopped that way may sit at a
    worse trial point, hence the parameters end at the best point evaluated (L-BFGS's iterates only improve on it).
    A trial point where the model cannot be evaluated (a step of the line search to a lengthscale that underflows to
    zero, a non-finite loss) ends the iterations the same way.
    """
    parameters = [p for p in mll.parameters() if p.requires_grad]
    # Runs of a few iterations (the history carries over) so the iteration count is checked between them.
    run = min(steps, 10)
    max_eval = 4 * run
    optimizer = torch.optim.LBFGS(
        parameters, max_iter=run, max_eval=max_eval, line_search_fn="strong_wolfe", tolerance_change=1e-12
    )
    best = {"loss": math.inf, "values": None}
    longest = estimate

    def closure() -> torch.Tensor:
        nonlocal longest
        if clock.left() < longest:
            raise _OutOfTime
        begin = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        try:
            loss = _loss(mll)
        except (ValueError, RuntimeError) as error:
            if best["values"] is None:  # the starting point itself: the caller's problem to see
                raise
            raise _InvalidTrialPoint from error
        loss.backward()
        value = loss.item()
        if not math.isfinite(value) and best["values"] is not None:
            raise _InvalidTrialPoint
        if value < best["loss"]:
            best["loss"], best["values"] = value, [p.detach().clone() for p in parameters]
        longest = max(longest, time.perf_counter() - begin)
        return loss

    done, evaluations = 0, 0
    try:
        while done < steps and clock.left() > 0:
            optimizer.step(closure)
            state = optimizer.state[parameters[0]]
            iterations, calls = state["n_iter"] - done, state["func_evals"] - evaluations
            done, evaluations = state["n_iter"], state["func_evals"]
            if iterations < run and calls < max_eval:  # stopped by its gradient or change tolerance: converged
                break
    except (_OutOfTime, _InvalidTrialPoint):
        pass
    if best["values"] is not None:
        with torch.no_grad():
            for parameter, value in zip(parameters, best["values"], strict=True):
                parameter.copy_(value)
    report(torch.tensor(best["loss"], dtype=torch.float64))


def _refit_seconds(model: ExactGP) -> float:
    """Estimated seconds of the exact refit at full size, from a float64 GEMM timed on this device now."""
    num_rows = model.train_targets.size(-1)
    num_features = sum(kernel.root_dim for kernel in _feature_kernels(model))
    if num_features == 0:
        return 0.0
    device = model.train_targets.device
    rows = min(num_rows, 256)
    # A private generator: timing the device must not move the caller's random stream.
    generator = torch.Generator(device=device).manual_seed(0)
    probe = torch.randn(rows, num_features, dtype=torch.float64, device=device, generator=generator)
    probe.mT @ probe  # untimed: the first float64 GEMM of a process also pays the BLAS library's start-up
    _synchronize(device)
    begin = time.perf_counter()
    probe.mT @ probe
    _synchronize(device)
    rate = rows * num_features**2 / max(time.perf_counter() - begin, 1e-9)  # multiply-adds per second
    work = REFIT_GRAM_COST * num_rows * num_features**2 + REFIT_SPECTRAL_COST * num_features**3
    return work / rate


def _feature_kernels(model: ExactGP) -> list[torch.nn.Module]:
    return [module for module in model.covar_module.modules() if isinstance(module, FeatureMapOwner)]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reporter(progress: bool) -> Callable[..., None]:
    def report(stage: str, loss: torch.Tensor | None, detail: str = "") -> None:
        if not progress:
            return
        value = "" if loss is None else f"  -mll/N = {loss.detach().item():.4f}"
        print(f"[gprf.fit_mll] {stage}{value}{'  ' + detail if detail else ''}", file=sys.stderr, flush=True)

    return report


#: The keyword options of :func:`fit_mll` (what BoTorch's ``fit_gpytorch_mll`` may pass through ``custom_fit``).
FIT_MLL_OPTIONS = tuple(name for name in inspect.signature(fit_mll).parameters if name != "mll")
