"""gprf.metrics against direct formulas and known values."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from linear_operator.operators import DenseLinearOperator

from gprf import metrics
from gprf.exceptions import LowRankStructureWarning
from gprf.kernels import RandomFourierKernel


def test_relative_frobenius_error():
    exact = torch.eye(3, dtype=torch.float64) * 2.0
    approx = exact + torch.tensor([[0.0, 0.3, 0.0], [0.3, 0.0, 0.0], [0.0, 0.0, 0.4]], dtype=torch.float64)
    expected = math.sqrt(0.09 + 0.09 + 0.16) / math.sqrt(12.0)
    assert metrics.relative_frobenius_error(approx, exact).item() == pytest.approx(expected, rel=1e-12)
    # LinearOperators and complex approximations (real part) are accepted.
    complex_approx = torch.complex(approx, torch.ones_like(approx))
    assert metrics.relative_frobenius_error(complex_approx, DenseLinearOperator(exact)).item() == pytest.approx(
        expected
    )
    with pytest.raises(ValueError, match="same size"):
        metrics.relative_frobenius_error(approx[:2], exact)
    batch = torch.stack([approx, exact])
    torch.testing.assert_close(
        metrics.relative_frobenius_error(batch, exact), torch.tensor([expected, 0.0], dtype=torch.float64)
    )


def test_relative_frobenius_error_of_a_random_feature_covariance_forms_it_without_the_dense_warning():
    # 30 points, 8 features: to_dense() warns (a model forming this unasked is a setup problem); the metric, which
    # needs the dense matrix by definition, forms the same matrix from the root and does not.
    x = torch.randn(30, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    kernel = ScaleKernel(RandomFourierKernel(8, 2, seed=0)).double()
    kernel.outputscale = 1.7
    covariance = kernel(x).evaluate_kernel()
    with pytest.warns(LowRankStructureWarning, match="dense 30 x 30"):
        dense = covariance.to_dense()
    exact = 1.7 * RBFKernel().double()(x).to_dense()
    noisy = covariance.add_diagonal(torch.tensor(0.1, dtype=torch.float64))
    with warnings.catch_warnings():
        warnings.simplefilter("error", LowRankStructureWarning)
        error = metrics.relative_frobenius_error(kernel(x), exact)  # the lazily evaluated kernel, as a model gives
        noisy_error = metrics.relative_frobenius_error(noisy, exact + 0.1 * torch.eye(30, dtype=torch.float64))
    expected = torch.linalg.matrix_norm(dense - exact) / torch.linalg.matrix_norm(exact)
    assert error.item() == pytest.approx(expected.item(), rel=1e-12)
    noisy_expected = torch.linalg.matrix_norm(dense - exact) / torch.linalg.matrix_norm(
        exact + 0.1 * torch.eye(30, dtype=torch.float64)
    )
    assert noisy_error.item() == pytest.approx(noisy_expected.item(), rel=1e-12)


def test_gaussian_kl_matches_torch_and_is_a_mean_per_point():
    generator = torch.Generator().manual_seed(0)
    mean_p, mean_q = torch.randn(2, 50, generator=generator, dtype=torch.float64)
    var_p, var_q = torch.rand(2, 50, generator=generator, dtype=torch.float64) + 0.1
    reference = torch.distributions.kl_divergence(
        torch.distributions.Normal(mean_p, var_p.sqrt()), torch.distributions.Normal(mean_q, var_q.sqrt())
    ).mean()
    torch.testing.assert_close(metrics.gaussian_kl(mean_p, var_p, mean_q, var_q), reference)
    assert metrics.gaussian_kl(mean_q, var_q, mean_q, var_q).item() == pytest.approx(0.0, abs=1e-14)
    with pytest.raises(ValueError, match="var_q"):
        metrics.gaussian_kl(mean_p, var_p, mean_q, -var_q)


def test_mnll_and_nmse():
    generator = torch.Generator().manual_seed(1)
    mean, target = torch.randn(2, 40, generator=generator, dtype=torch.float64)
    var = torch.rand(40, generator=generator, dtype=torch.float64) + 0.2
    reference = -torch.distributions.Normal(mean, var.sqrt()).log_prob(target).mean()
    torch.testing.assert_close(metrics.mnll(mean, var, target), reference)
    assert metrics.nmse(torch.full_like(target, target.mean().item()), target).item() == pytest.approx(1.0)
    assert metrics.nmse(target, target).item() == 0.0


def test_classification_metrics():
    target = torch.tensor([0, 1, 2, 1])
    probs = torch.tensor([[0.9, 0.05, 0.05], [0.2, 0.7, 0.1], [0.6, 0.3, 0.1], [0.1, 0.8, 0.1]], dtype=torch.float64)
    assert metrics.error_rate(probs, target).item() == pytest.approx(0.25)
    assert metrics.error_rate(probs.argmax(-1), target).item() == pytest.approx(0.25)
    # Bins (15 equal widths): 0.9 -> correct, 0.7 -> correct, 0.6 -> wrong, 0.8 -> correct, one point per bin.
    expected = (abs(1 - 0.9) + abs(1 - 0.7) + abs(0 - 0.6) + abs(1 - 0.8)) / 4
    assert metrics.expected_calibration_error(probs, target).item() == pytest.approx(expected)
    with pytest.raises(ValueError, match="probs must be"):
        metrics.expected_calibration_error(probs[0], target)
