"""Adversarial use of the shipped test kit (:mod:`gprf.testing`) and of :mod:`gprf.settings`: z-tests with too few
draws, zero or infinite variances and impossible false-alarm rates; settings outside their choices."""

from __future__ import annotations

import math

import pytest
import torch

from gprf import settings
from gprf.testing import assert_unbiased, mean_z_scores, z_bound


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: z_bound(0), "num_checks must be a positive int, got 0"),
        (lambda: z_bound(2.0), "num_checks must be a positive int"),
        (lambda: z_bound(3, 0.0), r"false_alarm must be a probability in \(0, 1\), got 0.0"),
        (lambda: z_bound(3, 1.0), "false_alarm must be a probability"),
        (lambda: mean_z_scores(torch.ones(1, 3), torch.ones(3), torch.ones(3)), "at least two draws along dimension 0"),
        (
            lambda: mean_z_scores(torch.ones(3, 3), torch.ones(3), torch.zeros(3)),
            "variance must be positive and finite",
        ),
        (
            lambda: mean_z_scores(torch.ones(3, 3), torch.ones(3), torch.full((3,), math.inf)),
            "variance must be positive and finite",
        ),
        (lambda: settings.validate_inputs("yes"), "validate_inputs takes True, False or 'auto', got 'yes'"),
        (lambda: settings.factor_dtype(torch.int32), "factor_dtype takes torch.float32 or torch.float64"),
        (lambda: settings.feature_chunk_size(0), "feature_chunk_size takes a positive number of rows"),
        (lambda: settings.weight_space_solver("foo"), "weight_space_solver takes 'auto', 'cholesky' or 'cg'"),
    ],
)
def test_bad_arguments_are_refused_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_the_bound_is_the_bonferroni_normal_quantile():
    assert math.isclose(z_bound(6), 5.230, abs_tol=5e-3)  # the documented value for six checks at 1e-6
    assert z_bound(100) > z_bound(1)


def test_assert_unbiased_fails_a_biased_mean_and_passes_an_unbiased_one():
    generator = torch.Generator().manual_seed(0)
    samples = torch.randn(400, 3, generator=generator, dtype=torch.float64)
    assert_unbiased(samples, torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
    with pytest.raises(AssertionError, match="standard errors"):
        assert_unbiased(samples + 1.0, torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))
