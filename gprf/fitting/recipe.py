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

Small problems (at most ``tune_rows`` points, and at most ``tune_features`` features or fewer points than features,
where a full step takes the :math:`N\times N` route) skip the subsample and the nesting: L-BFGS runs on the full
marginal likelihood, followed by the exact scale refit.
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial

import torch
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP

from gprf._checks import check_training_inputs
from gprf.fitting.budget import FitClock, RefitCost, probe_refit_cost, probe_sizes
from gprf.fitting.end_point import parameter_values
from gprf.fitting.exact_route import EXACT_STARTS, ExactSteps, fit_exact_mll, holds_preconditioned_kernel
from gprf.fitting.fit_arguments import (
    check_callback,
    check_choice,
    check_count,
    check_flag,
    check_learning_rate,
    check_positive_seconds,
    resolve_seed,
)
from gprf.fitting.growth import FeatureGrowth
from gprf.fitting.handover import RefitGram
from gprf.fitting.placement import LOCAL_ROWS, row_placement
from gprf.fitting.row_subsample import training_rows
from gprf.fitting.scale_fit import (
    likelihood_takes_points_route,
    supports_exact_scale_fit,
    training_feature_sums,
)
from gprf.fitting.scale_statistics import FeatureSums, ScaleStatistics
from gprf.kernels.feature_kernel import FeatureKernel
from gprf.kernels.feature_map_owner import FeatureMapOwner
from gprf.linalg import CapacitanceFactor

#: Share of ``time_budget`` the tuning stage keeps however costly the refit at the model's full size: a refit that
#: needs more than the rest runs on a prefix of the features (``grow="fit"``) or overruns (``grow="full"``). Tuning
#: starved by a large refit was what made more features look worse under a budget.
TUNING_SHARE = 0.5
#: The values of ``grow``.
GROW_OPTIONS = ("fit", "full")


def fit_mll(
    mll: ExactMarginalLogLikelihood,
    *,
    time_budget: float | None = None,
    grow: str = "fit",
    exact_start: str = "subsample",
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
        time_budget: Wall-clock seconds for the whole fit (``None``: no limit), kept to within 10% plus one
            marginal-likelihood evaluation. At the start, timed probes estimate the exact refit's cost at the
            model's size (:mod:`gprf.fitting.budget`); tuning stops when only that much is left, or at
            ``TUNING_SHARE`` (half) of the budget when the refit would need more than the other half and ``grow``
            is ``"fit"``. Finishing steps run while time is left.
        grow: How far the nested feature kernels grow back for the refit when the time left cannot cover the refit
            at the model's size: ``"fit"`` (default) cuts them to the largest prefix of their draws whose refit
            fits, and **the model keeps that many features from then on**; ``"full"`` runs the refit at full size
            anyway, overrunning the budget. Either way a :class:`~gprf.exceptions.BudgetWarning` says so, with the
            estimate, before the refit starts. Without ``time_budget`` the model keeps its size.
        exact_start: For exact models (a :class:`~gprf.kernels.PreconditionedKernel` in the covariance), where
            the full-data conjugate-gradient steps start: ``"subsample"`` (default) after ``tune_steps`` exact Adam
            steps on a seeded subsample of ``tune_rows`` rows, at most 2,000 (a Cholesky factorisation, until half
            of ``time_budget``); ``"surrogate"`` after the random-feature recipe on the kernel's random-feature
            surrogate (at most half of ``time_budget``). :mod:`gprf.fitting.exact_route` compares them.
        tune_features: Features of the tuning stage (a prefix of each kernel's draw), at least 1; ``None`` or a
            number at least the model's keeps the full draw.
        tune_rows: Rows of the seeded subsample of the tuning stage, at least 1; ``None`` uses every row. The
            subsample carries its rows' observed noise (``FixedNoiseGaussianLikelihood``, BoTorch's
            ``train_Yvar``, Dirichlet classification), restored with the full data after tuning.
        tune_steps: Adam steps of the tuning stage.
        lr: Adam learning rate.
        finish_steps: L-BFGS iterations on the full marginal likelihood at the end, while the time budget lasts
            (an evaluation starts only when the time left covers the longest one so far; the best point evaluated
            is kept); ``None``: 100 for small problems (no subsample and no nesting: see :mod:`gprf.fitting.recipe`),
            0 otherwise (a full-size evaluation costs about as much as the exact refit, so a budget that leaves room
            for a few of them gains little; measured in the regression benchmark's documentation).
        seed: Seed of the row subsample, an integer in :math:`[0, 2^{63})`; ``None`` derives one from torch's
            global generator state without advancing it (so ``torch.manual_seed`` makes the fit repeatable).
        progress: Print each stage and its marginal likelihood to stderr.
        callback: ``callback(stage, seconds)`` after every tuning step and stage; the time it takes is not counted
            in ``time_budget`` (use it to evaluate checkpoints).

    Returns:
        ``mll``, in eval mode, at hyperparameters where the model's prediction cache factors. The refit's Gram
        matrix is handed to the model's prediction strategy (:mod:`gprf.fitting.handover`), so the first
        prediction forms only the test points' features; elsewhere (finishing steps after the last refit, other
        likelihoods, complex or localized posteriors, rows sharded over processes: predict from those with
        :func:`gprf.distributed.sharded_predictor`) the check builds the cache once and drops it. When the model
        cannot predict at the point the fit ends at (its capacitance does not factor numerically), the
        hyperparameters are set back to the last stage where it can, with a
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
    grow = check_choice(grow, "grow", GROW_OPTIONS, "how far the features grow back within time_budget")
    exact_start = check_choice(exact_start, "exact_start", EXACT_STARTS, "the exact route's start")
    tune_features = check_count(tune_features, "tune_features", minimum=1, optional=True, meaning="features")
    tune_rows = check_count(tune_rows, "tune_rows", minimum=1, optional=True, meaning="rows of the subsample")
    tune_steps = check_count(tune_steps, "tune_steps", minimum=0, optional=False, meaning="Adam steps")
    lr = check_learning_rate(lr)
    finish_steps = check_count(finish_steps, "finish_steps", minimum=0, optional=True, meaning="L-BFGS iterations")
    seed = resolve_seed(seed)
    progress = check_flag(progress, "progress")
    callback = check_callback(callback)
    placement = row_placement(mll)
    clock = FitClock(time_budget, callback, placement.now)
    if holds_preconditioned_kernel(model):  # an exact GP: tuned through its random features, then exact steps
        tuning = dict(tune_features=tune_features, tune_rows=tune_rows, tune_steps=tune_steps, seed=seed, grow=grow)
        surrogate = partial(fit_mll, **tuning, lr=lr, progress=progress)
        steps = ExactSteps(clock, _reporter(progress), _loss, _project_onto_bounds)
        return fit_exact_mll(
            mll,
            surrogate,
            steps,
            start=exact_start,
            tune_rows=tune_rows,
            tune_steps=tune_steps,
            lr=lr,
            finish_steps=finish_steps,
            seed=seed,
        )
    report = _reporter(progress)
    num_rows = placement.num_rows(model)
    nested = _nested_kernels(model, tune_features)
    subsample = tune_rows is not None and num_rows > tune_rows
    # Fewer points than features: a full step takes the N x N route, O(N^2 F), as cheap as the exact GP's. Nesting
    # would save little there, and its small-F tuning left Bayesian-optimisation models with a noise 15-70 times the
    # exact GP's (the approximation error of the prefix, absorbed; docs/botorch.rst).
    small = not subsample and (not nested or (placement is LOCAL_ROWS and likelihood_takes_points_route(model)))
    if small:
        nested = []
    exact_scale_fit = supports_exact_scale_fit(mll)  # the likelihood and kernel types do not change during the fit
    if finish_steps is None:
        finish_steps = 100 if small else 0

    mll.train()
    checkpoints = [("the start", parameter_values(mll))]
    growth = FeatureGrowth(mll, nested, tune_features, num_rows)
    cost = None

    def probe() -> RefitCost:
        total = growth.total(None)
        rows, cap = probe_sizes(num_rows, growth.largest)

        def probe_here() -> RefitCost:
            with growth.capped(cap):  # resized outside the timing
                form_sums = partial(training_feature_sums, mll)
                return probe_refit_cost(model.train_targets.device, form_sums, _decompose, rows, cap, total)

        return placement.refit_cost(model, probe_here)

    if time_budget is not None and exact_scale_fit and not small:
        begin = clock.elapsed
        cost = probe()
        probe_seconds = clock.elapsed - begin
    reserve = 0.0
    if cost is not None:
        estimate = cost.seconds(num_rows, growth.total(None))
        # The refit's share, and time for measuring its cost again just before it.
        reserve = min(estimate, (1 - TUNING_SHARE) * time_budget) + probe_seconds
        report(f"keeping {reserve:.1f} s for the refit (estimated {estimate:.1f} s at F = {growth.total(None)})", None)
    if not small and tune_steps > 0:
        rows = placement.subsample(model, tune_rows if subsample else num_rows, seed)
        with ExitStack() as stack:
            for kernel in nested:
                stack.enter_context(kernel.features_resized(tune_features))
            stack.enter_context(training_rows(model, mll.likelihood, rows))
            sizes = f"{rows.numel()} rows, F = {tune_features if nested else 'full'}"
            _adam(mll, tune_steps, lr, clock, reserve, lambda step, loss: report(f"tune {step} ({sizes})", loss))
        checkpoints.append(("tuning", parameter_values(mll)))
    if cost is not None:
        cost = cost.slower(probe())  # measured again just before the refit: the slower rates count
    clock.checkpoint("tune")

    refit = None
    if exact_scale_fit:
        if cost is not None:
            growth.fit_refit_within(cost, clock, grow, report)
        result, sums = placement.fit_scale_with_sums(mll)
        refit = RefitGram.after_refit(mll, sums)  # None where the refit took the points route
        report(f"scale refit (full data, F = {growth.total(None)})", None, detail=str(result))
        checkpoints.append(("the scale refit", parameter_values(mll)))
        clock.checkpoint("scale")
    if finish_steps > 0 and clock.left() > 0:
        estimate = 0.0 if cost is None else cost.seconds(num_rows, growth.total(None))
        _lbfgs(mll, finish_steps, clock, estimate, lambda loss: report("finish (L-BFGS, full data, full F)", loss))
        if exact_scale_fit and clock.left() >= estimate:
            checkpoints.append(("the finishing L-BFGS", parameter_values(mll)))
            refit = None  # the old Gram goes before the new one is formed
            _, sums = placement.fit_scale_with_sums(mll)
            refit = RefitGram.after_refit(mll, sums)
        clock.checkpoint("finish")
    handed_over = placement.end_fit(mll, refit, checkpoints)
    report(f"done in {clock.elapsed:.1f} s" + (" (prediction cache from the refit)" if handed_over else ""), None)
    return mll


def _decompose(sums: FeatureSums) -> None:
    """The refit's :math:`F^3` steps on ``sums``: the eigendecomposition and the prediction factor (timing probe)."""
    ScaleStatistics.from_sums(sums)
    CapacitanceFactor.from_gram(sums.gram)


def _check_mll(mll: object) -> ExactGP:
    if not isinstance(mll, ExactMarginalLogLikelihood) or not isinstance(mll.model, ExactGP):
        raise TypeError(
            f"fit_mll takes gpytorch.mlls.ExactMarginalLogLikelihood of an ExactGP, got {type(mll).__name__}; "
            "fit other objectives with a torch optimizer."
        )
    if type(mll).forward is not ExactMarginalLogLikelihood.forward and row_placement(mll) is LOCAL_ROWS:
        # e.g. GPyTorch's LeaveOneOutPseudoLikelihood: the scale refit would maximise another objective than the steps.
        # (A marginal likelihood with its own row placement, gprf's sharded one, is that of the whole data.)
        raise TypeError(
            f"fit_mll maximises the exact marginal likelihood, but {type(mll).__name__} computes another objective; "
            "pass gpytorch.mlls.ExactMarginalLogLikelihood, or fit this one with a torch optimizer."
        )
    if mll.model.train_inputs is None:
        raise ValueError("fit_mll: the model has no training data (model.set_train_data first).")
    check_training_inputs(mll.model.train_inputs)
    _check_observed_noise(mll.likelihood, mll.model.train_targets.size(-1))
    return mll.model


def _check_observed_noise(likelihood: object, num_rows: int) -> None:
    """Refuse observed noise GPyTorch would silently drop: a ``FixedNoiseGaussianLikelihood`` whose noise does not
    have one variance per training point is a no-op there (zero noise, with only a ``GPInputWarning``)."""
    if not isinstance(likelihood, FixedNoiseGaussianLikelihood):
        return
    noise = likelihood.noise_covar.noise
    if noise.size(-1) != num_rows:
        raise ValueError(
            f"fit_mll: the FixedNoiseGaussianLikelihood holds {noise.size(-1)} noise variances but the model has "
            f"{num_rows} training points; pass one variance per point (train_Yvar of the training targets' shape)."
        )


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
    clock: FitClock,
    reserve: float,
    report: Callable[[int, torch.Tensor], None],
) -> None:
    """Adam steps until ``steps`` are done or the next one would eat into the last ``reserve`` seconds of the budget
    (judged by the longest step so far; the first step always runs)."""
    optimizer = torch.optim.Adam(mll.parameters(), lr=lr)
    limit = None if clock.budget is None else clock.budget - reserve
    longest, before = 0.0, clock.elapsed
    for step in range(1, steps + 1):
        optimizer.zero_grad(set_to_none=True)
        loss = _loss(mll)
        loss.backward()
        optimizer.step()
        _project_onto_bounds(mll)
        after = clock.elapsed
        longest, before = max(longest, after - before), after
        if step == 1 or step == steps or step % 10 == 0:
            report(step, loss)
        clock.checkpoint(f"tune {step}")
        if limit is not None and step < steps and after + longest > limit:
            report(step, loss)
            break


class _OutOfTime(Exception):
    """Raised inside the L-BFGS closure when the next evaluation would not finish within the time budget."""


class _InvalidTrialPoint(Exception):
    """Raised inside the L-BFGS closure at a trial point where the model cannot be evaluated."""


def _lbfgs(
    mll: ExactMarginalLogLikelihood,
    steps: int,
    clock: FitClock,
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
        begin = clock.now()
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
        longest = max(longest, clock.now() - begin)
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


def _feature_kernels(model: ExactGP) -> list[torch.nn.Module]:
    return [module for module in model.covar_module.modules() if isinstance(module, FeatureMapOwner)]


def _reporter(progress: bool) -> Callable[..., None]:
    def report(stage: str, loss: torch.Tensor | None, detail: str = "") -> None:
        if not progress:
            return
        value = "" if loss is None else f"  -mll/N = {loss.detach().item():.4f}"
        print(f"[gprf.fit_mll] {stage}{value}{'  ' + detail if detail else ''}", file=sys.stderr, flush=True)

    return report


#: The keyword options of :func:`fit_mll` (what BoTorch's ``fit_gpytorch_mll`` may pass through ``custom_fit``).
FIT_MLL_OPTIONS = tuple(name for name in inspect.signature(fit_mll).parameters if name != "mll")
