"""The calls the benchmarks time or run (``--what acquisition``, ``small-n`` and ``small-bo``): BoTorch's qLogNEI, and
the posterior's mean and variance, each with its gradient with respect to the points."""

from __future__ import annotations

import torch
from torch import Tensor

QMC_SAMPLES = 128


def log_nei(model: torch.nn.Module, baseline: Tensor, seed: int):
    """``qLogNoisyExpectedImprovement`` with :data:`QMC_SAMPLES` quasi-random samples seeded ``seed`` and the
    ``baseline`` pruned once at construction."""
    from botorch.acquisition.logei import qLogNoisyExpectedImprovement
    from botorch.sampling import SobolQMCNormalSampler

    sampler = SobolQMCNormalSampler(torch.Size([QMC_SAMPLES]), seed=seed)
    return qLogNoisyExpectedImprovement(model, X_baseline=baseline, sampler=sampler, prune_baseline=True)


def with_points_gradient(fn, points: Tensor):
    """A call of ``fn`` at ``points`` whose summed value is differentiated with respect to the points."""

    def run() -> Tensor:
        inputs = points.detach().requires_grad_(True)
        (gradient,) = torch.autograd.grad(fn(inputs).sum(), inputs)
        return gradient

    return run


def posterior_terms(model: torch.nn.Module):
    """The sum of the posterior's means and variances at the points (both enter the gradient)."""

    def evaluate(points: Tensor) -> Tensor:
        posterior = model.posterior(points)
        return posterior.mean.sum() + posterior.variance.sum()

    return evaluate
