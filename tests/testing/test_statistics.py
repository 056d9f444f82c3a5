"""gprf.testing.statistics: the z-bound, z-scores against closed-form variances, and kernel draws."""

from __future__ import annotations

import math

import pytest
import torch

from gprf.kernels import RandomFourierKernel
from gprf.testing import assert_unbiased, diagonal_draws, mean_z_scores, z_bound


def test_z_bound_is_the_bonferroni_normal_quantile():
    assert z_bound(1, 0.05) == pytest.approx(1.959964, abs=1e-6)  # the two-sided 95% quantile
    assert z_bound(10, 0.1) == pytest.approx(2.575829, abs=1e-6)  # 0.995 quantile: 0.1 shared by 10 checks
    assert z_bound(1) == pytest.approx(4.891638, abs=1e-6)  # two-sided 1e-6
    assert z_bound(6) > z_bound(1)


@pytest.mark.parametrize(
    ("num_checks", "false_alarm", "match"),
    [
        (0, 1e-6, "num_checks"),
        (2.0, 1e-6, "num_checks"),
        (True, 1e-6, "num_checks"),
        (3, 0.0, "false_alarm"),
        (3, 1.0, "false_alarm"),
    ],
)
def test_z_bound_refuses_bad_arguments(num_checks, false_alarm, match):
    with pytest.raises(ValueError, match=match):
        z_bound(num_checks, false_alarm)


def test_mean_z_scores():
    samples = torch.tensor([[1.0, 0.0], [3.0, 4.0]])  # means 2 and 2 of two draws
    z = mean_z_scores(samples, torch.tensor([1.0, 0.0]), torch.tensor([2.0, 8.0]))
    torch.testing.assert_close(z, torch.tensor([1.0, 1.0]))  # (2 - 1) / sqrt(2 / 2), (2 - 0) / sqrt(8 / 2)


@pytest.mark.parametrize("variance", [0.0, math.inf, -1.0])
def test_mean_z_scores_refuses_a_variance_without_a_standard_error(variance):
    with pytest.raises(ValueError, match="positive and finite"):
        mean_z_scores(torch.zeros(5, 2), torch.zeros(2), torch.tensor([1.0, variance]))


def test_mean_z_scores_needs_two_draws():
    with pytest.raises(ValueError, match="at least two draws"):
        mean_z_scores(torch.zeros(1, 2), torch.zeros(2), torch.ones(2))


def test_assert_unbiased_passes_the_mean_and_catches_a_bias_of_a_few_standard_errors():
    generator = torch.Generator().manual_seed(0)
    samples = torch.randn(2000, 4, generator=generator, dtype=torch.float64)
    variance = torch.ones(4, dtype=torch.float64)
    z = assert_unbiased(samples, torch.zeros(4, dtype=torch.float64), variance)
    assert z.shape == (4,) and float(z.abs().max()) < z_bound(4)
    # A bias of 0.2 is 0.2 / sqrt(1 / 2000) = 8.9 standard errors (plus the sample's own z-scores), beyond the bound
    # of 5.16 for four checks.
    with pytest.raises(AssertionError, match=r"off its expectation by \d+\.\d+ standard errors \(bound 5\.16 for 4"):
        assert_unbiased(samples + 0.2, torch.zeros(4, dtype=torch.float64), variance)


def test_diagonal_draws_redraw_the_kernel_with_seeded_generators():
    kernel = RandomFourierKernel(16, num_dims=2, seed=0).double()
    x, y = torch.zeros(3, 2, dtype=torch.float64), 0.5 * torch.ones(3, 2, dtype=torch.float64)
    draws = diagonal_draws(kernel, x, y, num_draws=4)
    assert draws.shape == (4, 3) and not draws.requires_grad
    assert not torch.allclose(draws[0], draws[1])
    kernel.resample_features(torch.Generator().manual_seed(2))
    torch.testing.assert_close(draws[2], kernel(x, y, diag=True).detach(), rtol=0, atol=0)
