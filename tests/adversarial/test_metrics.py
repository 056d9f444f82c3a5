"""Adversarial inputs to :mod:`gprf.metrics`: mismatched shapes, non-positive or NaN variances, labels outside the
classes, zero reference matrices, and the bin count of the calibration error."""

from __future__ import annotations

import math

import pytest
import torch

from gprf import metrics


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: metrics.mnll(torch.zeros(3), torch.ones(3), torch.zeros(4)),
            "mean and target must have the same shape",
        ),
        (lambda: metrics.mnll(torch.zeros(3), -torch.ones(3), torch.zeros(3)), "var must be positive"),
        (
            lambda: metrics.mnll(torch.zeros(3), torch.full((3,), math.nan), torch.zeros(3)),
            r"var must be positive \(and",
        ),
        (lambda: metrics.gaussian_kl(*[torch.zeros(2)] * 4), "var_p must be positive"),
        (
            lambda: metrics.gaussian_kl(torch.zeros(2), torch.ones(2), torch.zeros(2), torch.tensor([1.0, math.nan])),
            "var_q must be positive",
        ),
        (lambda: metrics.nmse(torch.zeros(3), torch.ones(4)), "prediction and target must have the same shape"),
        (lambda: metrics.error_rate(torch.zeros(3, 2), torch.tensor([0, 5, 1])), r"class labels 0 \.\. 1 .* to 5"),
        (lambda: metrics.error_rate(torch.zeros(3, 2), torch.tensor([0, -1, 1])), r"class labels 0 \.\. 1"),
        (lambda: metrics.error_rate(torch.zeros(4), torch.zeros(3)), "predicted labels and target must have the same"),
        (
            lambda: metrics.expected_calibration_error(torch.full((3, 2), 0.5), torch.tensor([0, 1, 1]), num_bins=0),
            "num_bins must be a positive integer, got 0",
        ),
        (
            lambda: metrics.expected_calibration_error(torch.full((3, 2), 0.5), torch.tensor([0, 1, 2])),
            r"class labels 0 \.\. 1",
        ),
        (lambda: metrics.expected_calibration_error(torch.full((3,), 0.5), torch.tensor([0, 1, 1])), r"probs must be"),
        (lambda: metrics.relative_frobenius_error(torch.eye(2), torch.zeros(2, 2)), "positive Frobenius norm"),
        (lambda: metrics.relative_frobenius_error(torch.eye(2), torch.eye(3)), "matrices of the same size"),
    ],
)
def test_bad_inputs_are_refused_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_values_of_simple_cases():
    assert float(metrics.relative_frobenius_error(2 * torch.eye(2), torch.eye(2))) == 1.0
    assert float(metrics.error_rate(torch.tensor([[0.9, 0.1], [0.2, 0.8]]), torch.tensor([0, 0]))) == 0.5
    torch.testing.assert_close(
        metrics.mnll(torch.zeros(1), torch.ones(1), torch.zeros(1)), 0.5 * torch.log(torch.tensor([2 * math.pi]))[0]
    )
    assert float(metrics.gaussian_kl(torch.zeros(2), torch.ones(2), torch.zeros(2), torch.ones(2))) == 0.0


def test_the_nmse_of_a_constant_target_is_infinite_as_documented():
    assert float(metrics.nmse(torch.zeros(1), torch.ones(1))) == math.inf
