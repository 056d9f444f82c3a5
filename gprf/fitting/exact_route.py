r"""``fit_mll``'s route for exact GPs whose covariance holds a :class:`~gprf.kernels.PreconditionedKernel`.

An exact marginal-likelihood step by preconditioned conjugate gradients costs :math:`O(N^2)` per iteration, so a
budget buys few of them; a random-feature step on a row subsample costs a tiny fraction of one. The route spends the
budget on both:

1. **surrogate**: for the time of this stage every ``PreconditionedKernel`` of the model is replaced by the
   random-feature kernel of its base kernel with as many features (:meth:`~gprf.kernels.PreconditionedKernel.
   random_feature_kernel`, which shares the base kernel's very ``Parameter`` objects and priors), and the
   random-feature recipe of :func:`gprf.fit_mll` runs on the model: nested small-:math:`F` tuning on a row
   subsample, then the exact refit of outputscale, noise and mean at full :math:`F` — with at most
   :data:`SURROGATE_SHARE` of the budget;
2. **exact**: Adam steps on the exact marginal likelihood (conjugate gradients and stochastic Lanczos quadrature,
   preconditioned by the kernel's feature root) with the time left. Each step is timed, and a step starts only
   while the time left covers the longest so far, so the budget is overshot by at most one step misjudged. The
   SLQ estimate is stochastic (fresh probes at every evaluation), hence Adam rather than a line search.

The surrogate's lengthscales carry its approximation (its noise absorbs the features' error), and the exact steps
move the hyperparameters towards the exact model's optimum from there.
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP

from gprf.exceptions import FitFallbackWarning
from gprf.fitting.end_point import NUMERICAL_FAILURES, parameter_values, restore_parameter_values
from gprf.fitting.recipe import _Clock, _loss, _project_onto_bounds, _reporter, fit_mll
from gprf.kernels.preconditioned_kernel import PreconditionedKernel

#: The largest share of ``time_budget`` the surrogate stage may take; the exact steps get the rest.
SURROGATE_SHARE = 0.5
#: Exact Adam steps when neither ``finish_steps`` nor ``time_budget`` bounds them.
DEFAULT_EXACT_STEPS = 100


def holds_preconditioned_kernel(model: ExactGP) -> bool:
    """Whether the covariance of ``model`` holds a :class:`~gprf.kernels.PreconditionedKernel` (the exact route)."""
    return any(isinstance(module, PreconditionedKernel) for module in model.covar_module.modules())


def fit_exact_mll(
    mll: ExactMarginalLogLikelihood,
    *,
    time_budget: float | None,
    tune_features: int | None,
    tune_rows: int | None,
    tune_steps: int,
    lr: float,
    finish_steps: int | None,
    seed: int,
    progress: bool,
    callback: Callable[[str, float], None] | None,
) -> ExactMarginalLogLikelihood:
    """The exact route of :func:`gprf.fit_mll` (its options already checked): the random-feature surrogate's recipe,
    then exact Adam steps (``finish_steps`` of them; ``None``: while the budget lasts, or
    :data:`DEFAULT_EXACT_STEPS` without a budget). Returns ``mll`` in eval mode.

    Raises:
        TypeError: The likelihood is not a ``GaussianLikelihood`` or ``FixedNoiseGaussianLikelihood``.
    """
    _check_likelihood(mll)
    clock = _Clock(time_budget, callback)
    report = _reporter(progress)
    surrogate_budget = None if time_budget is None else SURROGATE_SHARE * time_budget
    with random_feature_surrogate(mll.model):
        fit_mll(
            mll,
            time_budget=surrogate_budget,
            tune_features=tune_features,
            tune_rows=tune_rows,
            tune_steps=tune_steps,
            lr=lr,
            seed=seed,
            progress=progress,
            callback=lambda stage, _: clock.checkpoint(stage),
        )
    steps = finish_steps
    if steps is None:
        steps = DEFAULT_EXACT_STEPS if time_budget is None else math.inf
    _exact_adam(mll, steps, lr, clock, lambda step, loss: report(f"exact {step} (full data, CG)", loss))
    clock.checkpoint("exact")
    mll.train()  # drops prediction caches built at other hyperparameters
    mll.eval()
    report(f"done in {clock.elapsed:.1f} s", None)
    return mll


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
    steps: float,
    lr: float,
    clock: _Clock,
    report: Callable[[int, torch.Tensor], None],
) -> None:
    """Adam steps on the exact marginal likelihood while the time left covers the longest step so far.

    A step whose evaluation fails numerically (a preconditioner that does not factor, a non-finite loss) ends the
    stage at the last point evaluated, with a :class:`~gprf.exceptions.FitFallbackWarning`; a failure at the first
    step (the surrogate's end point) is the caller's to see.
    """
    parameters = [parameter for parameter in mll.parameters() if parameter.requires_grad]
    optimizer = torch.optim.Adam(parameters, lr=lr)
    mll.train()
    longest, evaluated = 0.0, None
    for step in itertools.count(1):
        if step > steps or clock.left() <= longest:
            break
        begin = time.perf_counter()
        point = parameter_values(mll)
        optimizer.zero_grad(set_to_none=True)
        try:
            loss = _loss(mll)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"the marginal likelihood is {loss.item()}")
            loss.backward()
        except (*NUMERICAL_FAILURES, FloatingPointError) as error:
            if evaluated is None:
                raise
            restore_parameter_values(mll, evaluated)
            warnings.warn(
                f"fit_mll: exact step {step} could not be evaluated ({type(error).__name__}: {error}); the fit ends "
                f"at the point step {step - 1} evaluated. Lower lr, or bound the noise from below.",
                FitFallbackWarning,
                stacklevel=4,
            )
            break
        evaluated = point
        optimizer.step()
        _project_onto_bounds(mll)
        longest = max(longest, time.perf_counter() - begin)
        report(step, loss)
        clock.checkpoint(f"exact {step}")
