r"""``fit_mll``'s route for exact GPs whose covariance holds a :class:`~gprf.kernels.PreconditionedKernel`.

An exact marginal-likelihood step by preconditioned conjugate gradients costs :math:`O(N^2)` per iteration, so a
budget buys few of them; a step on a small subsample of rows, exact by Cholesky, or random-feature on the surrogate,
costs a fraction of one. The route spends the budget on both: first a start (``exact_start``), then the full data.

* ``exact_start="subsample"`` (the default): Adam steps on the exact marginal likelihood of at most
  :data:`EXACT_TUNE_ROWS` seeded rows (a Cholesky factorisation; ``tune_steps`` of them, until
  :data:`EXACT_TUNE_SHARE` of the budget has passed), from the model's own hyperparameters;
* ``exact_start="surrogate"``: every ``PreconditionedKernel`` of the model is replaced, for the time of this stage,
  by the random-feature kernel of its base kernel with as many features
  (:meth:`~gprf.kernels.PreconditionedKernel.random_feature_kernel`, which shares the base kernel's very
  ``Parameter`` objects and priors), and the random-feature recipe of :func:`gprf.fit_mll` runs on the model:
  nested small-:math:`F` tuning on a row subsample, then the exact refit of outputscale, noise and mean at full
  :math:`F` on all rows — with at most :data:`SURROGATE_SHARE` of the budget.

Then **exact steps**: Adam on the exact marginal likelihood of all rows (conjugate gradients and stochastic Lanczos
quadrature, preconditioned by the kernel's feature root) with the time left. Each step is timed, and a step starts
only while the time left covers the longest so far, so the budget is overshot by at most one step misjudged. The
SLQ estimate is stochastic (fresh probes at every evaluation), hence Adam rather than a line search. With the
subsample start one Adam state runs through both stages (the loss is per row, so its scale carries over).

**Which start.** The surrogate's hyperparameters carry its approximation: its noise absorbs the features' error,
and at short lengthscales its Monte-Carlo error dominates. On 10,800 kin40k rows (lengthscales 1.4-2.8, noise
0.005) the exact GP at the surrogate's end point predicts with test RMSE 0.127, and 100 exact subsample steps from
there reach 0.131, where 100 from lengthscale 1, outputscale 1 and noise 0.1 reach 0.115; on protein both starts
give 0.595 after 100 steps, and two full-data steps bring the surrogate's to 0.591 and the other to 0.594. The
surrogate's refit sees every row, so it is the start to try where a 2,000-row subsample says little about the
whole (very large :math:`N`, long lengthscales). Measured by step counts, one CPU thread:
``benchmarks/regression_methods.py``'s ``gprf-exact`` model, ``fit_mll`` without a budget.
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

import torch
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP
from gpytorch.settings import max_cholesky_size, max_lanczos_quadrature_iterations
from linear_operator.utils.warnings import NumericalWarning

from gprf.exceptions import FitFallbackWarning
from gprf.fitting.end_point import NUMERICAL_FAILURES, parameter_values, restore_parameter_values
from gprf.fitting.row_subsample import subsample_rows, training_rows
from gprf.kernels.preconditioned_kernel import PreconditionedKernel

#: The values of ``exact_start``: how the exact route finds the start of its full-data steps.
EXACT_STARTS = ("subsample", "surrogate")
#: The largest share of ``time_budget`` the surrogate start may take; the exact steps get the rest.
SURROGATE_SHARE = 0.5
#: The most rows of the exact subsample start (its steps cost the cube of its rows).
EXACT_TUNE_ROWS = 2000
#: The share of ``time_budget`` by whose end the exact subsample start stops.
EXACT_TUNE_SHARE = 0.5
#: Exact Adam steps on all rows when neither ``finish_steps`` nor ``time_budget`` bounds them.
DEFAULT_EXACT_STEPS = 100
#: Lanczos iterations of the full-data steps' log-determinant (at most; a user's lower setting is kept).
#: linear_operator runs conjugate gradients for at least as many iterations as its stochastic Lanczos quadrature
#: takes (GPyTorch's default 20), however well preconditioned the system: with the feature-root preconditioner the
#: spectrum of :math:`P^{-1/2}\hat KP^{-1/2}` clusters near 1 and fewer quadrature nodes suffice, and every
#: iteration saved is a pass over the :math:`N\times N` kernel matrix.
EXACT_LANCZOS_ITERATIONS = 10


class UnconvergedSolveError(FloatingPointError):
    """An exact step's conjugate gradients stopped at linear_operator's iteration limit above their tolerance."""


@contextmanager
def unconverged_solves_raise() -> Iterator[None]:
    """Raise :class:`UnconvergedSolveError` after the block if linear_operator warned that conjugate gradients stopped
    above their tolerance; its other warnings are passed on.

    The marginal likelihood and gradients of such a step mean nothing, and nothing else shows it: on the full protein
    set (41,157 rows, float32, one GPU) steps whose solves had stopped at residual norms of 10^3-10^4 drove the noise
    to 2e-4 and the test RMSE to 6.6e4.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    unconverged = None
    for warning in caught:
        if issubclass(warning.category, NumericalWarning) and str(warning.message).startswith("CG terminated"):
            unconverged = str(warning.message).split(" which ")[0]
        else:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    if unconverged is not None:
        raise UnconvergedSolveError(f"conjugate gradients did not converge ({unconverged})")


def holds_preconditioned_kernel(model: ExactGP) -> bool:
    """Whether the covariance of ``model`` holds a :class:`~gprf.kernels.PreconditionedKernel` (the exact route)."""
    return any(isinstance(module, PreconditionedKernel) for module in model.covar_module.modules())


class Clock(Protocol):
    """The fit's wall clock (``gprf.fitting.recipe``'s): the time budget, and callbacks not counted in it."""

    budget: float | None

    @property
    def elapsed(self) -> float: ...

    def left(self) -> float: ...

    def checkpoint(self, stage: str) -> None: ...


@dataclass(frozen=True)
class ExactSteps:
    """What the exact steps share with :func:`gprf.fit_mll`'s recipe: its clock (started with the fit), its progress
    reporter ``report(stage, loss)``, its loss ``loss(mll)`` (negative marginal likelihood, raw parameters projected
    into their bounds first) and that projection ``project_onto_bounds(mll)``."""

    clock: Clock
    report: Callable[..., None]
    loss: Callable[[ExactMarginalLogLikelihood], torch.Tensor]
    project_onto_bounds: Callable[[ExactMarginalLogLikelihood], None]


def fit_exact_mll(
    mll: ExactMarginalLogLikelihood,
    fit_surrogate: Callable[..., ExactMarginalLogLikelihood],
    steps: ExactSteps,
    *,
    start: str,
    tune_rows: int | None,
    tune_steps: int,
    lr: float,
    finish_steps: int | None,
    seed: int,
) -> ExactMarginalLogLikelihood:
    """The exact route of :func:`gprf.fit_mll` (its options already checked): the ``start`` (``"subsample"``:
    ``tune_steps`` exact Adam steps on ``min(tune_rows, EXACT_TUNE_ROWS)`` rows drawn with ``seed``;
    ``"surrogate"``: ``fit_surrogate(mll, time_budget=, callback=)``, the random-feature recipe with the tuning
    options, on the surrogate), then exact Adam steps on all rows with learning rate ``lr`` (``finish_steps`` of
    them; ``None``: while the budget lasts, or :data:`DEFAULT_EXACT_STEPS` without a budget). Returns ``mll`` in
    eval mode.

    Raises:
        TypeError: The likelihood is not a ``GaussianLikelihood`` or ``FixedNoiseGaussianLikelihood``.
    """
    _check_likelihood(mll)
    clock = steps.clock
    budget = clock.budget
    if start == "surrogate":
        with random_feature_surrogate(mll.model):
            fit_surrogate(
                mll,
                time_budget=None if budget is None else SURROGATE_SHARE * budget,
                callback=lambda stage, _: clock.checkpoint(stage),
            )
    parameters = [parameter for parameter in mll.parameters() if parameter.requires_grad]
    optimizer = torch.optim.Adam(parameters, lr=lr)
    mll.train()
    ended = False
    if start == "subsample":
        ended = _exact_subsample_adam(mll, optimizer, tune_rows, tune_steps, seed, steps)
    count = finish_steps
    if count is None:
        count = DEFAULT_EXACT_STEPS if budget is None else math.inf
    if not ended:
        _exact_adam(mll, optimizer, count, math.inf, steps, "exact", "full data, CG")
    clock.checkpoint("exact")
    mll.train()  # drops prediction caches built at other hyperparameters
    mll.eval()
    steps.report(f"done in {clock.elapsed:.1f} s", None)
    return mll


def _exact_subsample_adam(
    mll: ExactMarginalLogLikelihood,
    optimizer: torch.optim.Optimizer,
    tune_rows: int | None,
    tune_steps: int,
    seed: int,
    steps: ExactSteps,
) -> bool:
    """The exact subsample start (by Cholesky; skipped when it would hold every row); whether a step that could
    not be evaluated ended the fit."""
    model = mll.model
    num_rows = model.train_targets.size(-1)
    size = min(EXACT_TUNE_ROWS, num_rows if tune_rows is None else tune_rows)
    if size >= num_rows:
        return False
    budget = steps.clock.budget
    until = math.inf if budget is None else EXACT_TUNE_SHARE * budget
    rows = subsample_rows(num_rows, size, seed, model.train_targets.device)
    with training_rows(model, mll.likelihood, rows), max_cholesky_size(size):
        return _exact_adam(mll, optimizer, tune_steps, until, steps, "exact subsample", f"{size} rows, Cholesky")


def _check_likelihood(mll: ExactMarginalLogLikelihood) -> None:
    likelihood = mll.likelihood
    if not isinstance(likelihood, (GaussianLikelihood, FixedNoiseGaussianLikelihood)):
        raise TypeError(
            "fit_mll: a model with a PreconditionedKernel needs a GaussianLikelihood or FixedNoiseGaussianLikelihood "
            f"(the preconditioner adds their noise to the random-feature covariance), got {type(likelihood).__name__}; "
            "for other likelihoods use the exact kernel itself (PreconditionedKernel.exact()) with an approximate "
            "GP, or a random-feature kernel (gprf.random_features)."
        )


@contextmanager
def random_feature_surrogate(model: ExactGP) -> Iterator[None]:
    """Every outermost :class:`~gprf.kernels.PreconditionedKernel` inside ``model`` replaced by its
    :meth:`~gprf.kernels.PreconditionedKernel.random_feature_kernel` (the same parameters) while the block runs, and
    put back afterwards, whatever happens in it."""
    places = list(_preconditioned_places(model))
    try:
        for parent, name, kernel in places:
            setattr(parent, name, kernel.random_feature_kernel())
        yield
    finally:
        for parent, name, kernel in places:
            setattr(parent, name, kernel)
        model.prediction_strategy = None  # built with the surrogate's covariance


def _preconditioned_places(module: torch.nn.Module) -> Iterator[tuple[torch.nn.Module, str, PreconditionedKernel]]:
    for name, child in module.named_children():
        if isinstance(child, PreconditionedKernel):
            yield module, name, child
        else:
            yield from _preconditioned_places(child)


def _exact_adam(
    mll: ExactMarginalLogLikelihood,
    optimizer: torch.optim.Optimizer,
    count: float,
    until: float,
    steps: ExactSteps,
    stage: str,
    rows: str,
) -> bool:
    """At most ``count`` Adam steps on the exact marginal likelihood of the model's training rows (``stage`` names
    them for the callback, ``rows`` says which rows in the progress report), while the time left covers the longest
    step so far and the clock is before ``until``; whether a step that could not be evaluated ended the fit.

    A step whose evaluation fails numerically (a preconditioner that does not factor, a non-finite loss, conjugate
    gradients that stop above their tolerance) ends the stage at the last point evaluated, with a
    :class:`~gprf.exceptions.FitFallbackWarning`; unconverged solves at the first step end it at the surrogate's
    point the same way, and other failures there (the surrogate's end point) are the caller's to see.
    """
    longest, evaluated = 0.0, None
    clock = steps.clock
    lanczos = min(EXACT_LANCZOS_ITERATIONS, max_lanczos_quadrature_iterations.value())
    for step in itertools.count(1):
        if step > count or clock.left() <= longest or clock.elapsed + longest > until:
            return False
        begin = time.perf_counter()
        point = parameter_values(mll)
        optimizer.zero_grad(set_to_none=True)
        try:
            with unconverged_solves_raise(), max_lanczos_quadrature_iterations(lanczos):
                loss = steps.loss(mll)
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"the marginal likelihood is {loss.item()}")
                loss.backward()
        except (*NUMERICAL_FAILURES, FloatingPointError) as error:
            if evaluated is None and isinstance(error, UnconvergedSolveError):
                warnings.warn(
                    f"fit_mll: the first exact step could not be evaluated ({error}); the fit ends at the "
                    "point the stage before reached. Use more preconditioner features (num_features), float64, or "
                    "raise linear_operator.settings.max_cg_iterations.",
                    FitFallbackWarning,
                    stacklevel=5,
                )
                return True
            if evaluated is None:
                raise
            restore_parameter_values(mll, evaluated)
            warnings.warn(
                f"fit_mll: exact step {step} could not be evaluated ({type(error).__name__}: {error}); the fit ends "
                f"at the point step {step - 1} evaluated. Lower lr, or bound the noise from below.",
                FitFallbackWarning,
                stacklevel=5,
            )
            return True
        evaluated = point
        optimizer.step()
        steps.project_onto_bounds(mll)
        longest = max(longest, time.perf_counter() - begin)
        steps.report(f"{stage} {step} ({rows})", loss)
        clock.checkpoint(f"{stage} {step}")
