"""benchmarks.bo_objectives: the Styblinski-Tang problem is noiseless with its known maximum, and the GP sample has
the Matern-3/2 prior's moments, is one function per seed and is observed with noise of the stated variance."""

from __future__ import annotations

import math

import pytest
import torch

from benchmarks.bo_objectives import GPSample, StyblinskiTang, make_objective

pytestmark = pytest.mark.botorch


def test_styblinski_tang_is_noiseless_with_its_maximum_at_the_known_point():
    objective = StyblinskiTang(3)
    optimum = torch.full((1, 3), (-2.903534 + 5) / 10, dtype=torch.float64)  # -2.903534 on [-5, 5]
    assert objective.value(optimum).item() == pytest.approx(39.1661657 * 3, rel=1e-7)
    x = torch.rand(7, 3, dtype=torch.float64)
    torch.testing.assert_close(objective.observe(x), objective.value(x).unsqueeze(-1))


def test_gp_sample_has_the_matern32_prior_covariance_over_seeds():
    # Over many seeds, f(x1) f(x2) averages to the Matern-3/2 kernel: variance 1 and k(r) = (1 + a) e^{-a},
    # a = sqrt(3) r / 0.5. Each product has variance <= 2 (Gaussian moments), so 400 seeds give a standard error
    # below 0.071; 4.5 standard errors bound the check.
    x = torch.tensor([[0.2, 0.3], [0.5, 0.3]], dtype=torch.float64)
    values = torch.stack([GPSample(2, seed, num_frequencies=256).value(x) for seed in range(400)])
    a = math.sqrt(3) * 0.3 / 0.5
    expected = torch.tensor([1.0, (1 + a) * math.exp(-a)], dtype=torch.float64)
    estimates = torch.stack([values[:, 0].pow(2).mean(), (values[:, 0] * values[:, 1]).mean()])
    assert (estimates - expected).abs().max() < 4.5 * math.sqrt(2 / 400)


def test_gp_sample_is_one_function_per_seed_observed_with_the_noise_variance():
    x = torch.rand(4000, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    first, again, other = GPSample(3, 5), GPSample(3, 5), GPSample(3, 6)
    torch.testing.assert_close(first.value(x), again.value(x))
    assert not torch.allclose(first.value(x), other.value(x))
    residuals = first.observe(x).squeeze(-1) - first.value(x)
    # The sample variance of 4000 normals with variance 1e-3 has a standard error of 1e-3 sqrt(2 / 3999).
    assert abs(residuals.var().item() - 1e-3) < 4.5 * 1e-3 * math.sqrt(2 / 3999)
    assert isinstance(make_objective("gp-sample", 3, 0, 1e-3), GPSample)
    assert isinstance(make_objective("styblinski-tang", 3, 0, 1e-3), StyblinskiTang)
