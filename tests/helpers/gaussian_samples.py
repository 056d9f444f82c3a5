"""Checks of Gaussian samples (posterior paths) against the moments they should have, with z-bounds from the
closed-form standard errors."""

from __future__ import annotations

import math

import torch


def assert_gaussian_moments(samples: torch.Tensor, mean: torch.Tensor, variance: torch.Tensor, bound: float) -> None:
    """The sample mean and sample variance of the ``S`` draws along dimension 0 of ``samples`` stay within ``bound``
    standard errors of ``mean`` and ``variance``: :math:`\\sqrt{\\sigma^2 / S}` for the mean and, for Gaussian values,
    :math:`\\sigma^2 \\sqrt{2 / (S - 1)}` for the sample variance."""
    num_samples = samples.size(0)
    assert ((samples.mean(0) - mean) / (variance / num_samples).sqrt()).abs().max() < bound
    z_variance = (samples.var(0) - variance) / (variance * math.sqrt(2 / (num_samples - 1)))
    assert z_variance.abs().max() < bound


def assert_paths_follow_the_posterior(model, test_x: torch.Tensor, num_paths: int, bound: float) -> None:
    """BoTorch's Matheron paths of a single-output ``model`` (in eval mode), drawn after seeding torch with 0, have
    the mean and variance of the model's posterior at ``test_x``."""
    from botorch.sampling.pathwise import draw_matheron_paths

    posterior = model.posterior(test_x)
    mean, variance = posterior.mean.detach().squeeze(-1), posterior.variance.detach().squeeze(-1)
    torch.manual_seed(0)
    with torch.no_grad():
        samples = draw_matheron_paths(model, torch.Size([num_paths]))(test_x)
    assert_gaussian_moments(samples, mean, variance, bound)
