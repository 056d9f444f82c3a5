"""benchmarks.acquisition_calls: the timed calls compute what they name, with gradients with respect to the points."""

from __future__ import annotations

import pytest
import torch

from benchmarks.acquisition_calls import QMC_SAMPLES, log_nei, posterior_terms, with_points_gradient

botorch = pytest.importorskip("botorch")


def _model():
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(12, 2, generator=generator, dtype=torch.float64)
    y = torch.sin(3 * x).sum(-1, keepdim=True)
    return botorch.models.SingleTaskGP(x, y).eval(), x


def test_posterior_terms_are_the_summed_mean_and_variance_and_their_points_gradient_is_autograds():
    model, x = _model()
    points = torch.rand(5, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    posterior = model.posterior(points)
    expected = posterior.mean.sum() + posterior.variance.sum()
    assert torch.equal(posterior_terms(model)(points), expected)
    gradient = with_points_gradient(posterior_terms(model), points)()
    inputs = points.clone().requires_grad_(True)
    (reference,) = torch.autograd.grad(posterior_terms(model)(inputs), inputs)
    torch.testing.assert_close(gradient, reference)


def test_log_nei_uses_the_seeded_quasi_random_sampler():
    model, x = _model()
    acquisition = log_nei(model, x, seed=3)
    assert acquisition.sampler.sample_shape == torch.Size([QMC_SAMPLES]) and acquisition.sampler.seed == 3
    candidates = torch.rand(4, 1, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    values = acquisition(candidates)
    assert values.shape == (4,) and torch.isfinite(values).all()
    torch.testing.assert_close(values, log_nei(model, x, seed=3)(candidates))  # the same seed, the same values
