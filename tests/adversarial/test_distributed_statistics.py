"""Adversarial use of :func:`gprf.streaming.all_reduce_statistics` and of hand-made
:class:`~gprf.streaming.SufficientStatistics`: no process group, a group of one, empty shards, statistics that are
not statistics, and sums that cannot be a model's."""

from __future__ import annotations

import dataclasses
import math

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from linear_operator.utils.errors import NotPSDError

from gprf.exceptions import NonFiniteTrainingDataError
from gprf.kernels import RandomFourierKernel
from gprf.streaming import StreamingFit, all_reduce_statistics
from gprf.testing import ExactGPModel, regression_data

X, Y = regression_data(n=60, d=2)


def _fit():
    model = ExactGPModel(
        X, Y, gpytorch.likelihoods.GaussianLikelihood(), ScaleKernel(RandomFourierKernel(8, num_dims=2, seed=0))
    ).double()
    return StreamingFit.from_model(model)


def test_without_a_process_group_the_error_names_init_process_group():
    with pytest.raises(RuntimeError, match=r"torch.distributed is not initialised: call .*init_process_group"):
        all_reduce_statistics(_fit().update(X, Y).statistics)


@pytest.mark.parametrize("statistics", [5, {"gram": torch.eye(2)}, None])
def test_what_is_not_statistics_is_refused(statistics):
    with pytest.raises(TypeError, match="all_reduce_statistics expects SufficientStatistics"):
        all_reduce_statistics(statistics)


def test_a_group_of_one_returns_the_same_statistics(group_of_one):
    statistics = _fit().update(X, Y).statistics
    reduced = all_reduce_statistics(statistics)
    for name in ("gram", "rhs", "quadratic", "log_noise", "num_data", "fingerprint"):
        assert torch.equal(getattr(reduced, name), getattr(statistics, name)), name
    assert reduced is not statistics


def test_an_empty_shard_reduces_to_no_data(group_of_one):
    reduced = all_reduce_statistics(_fit().update(X[:0], Y[:0]).statistics)
    assert int(reduced.num_data) == 0
    assert float(reduced.log_marginal_likelihood()) == 0.0


def test_statistics_of_no_data_predict_the_prior():
    fit = _fit().update(X[:0], Y[:0])
    mean, variance = fit.predictor().predict(X[:3])
    outputscale = fit.covar_module.outputscale.detach()
    torch.testing.assert_close(mean, torch.zeros(3, dtype=torch.float64))
    torch.testing.assert_close(variance, outputscale.expand(3))


def test_a_nan_gram_matrix_names_the_data():
    statistics = _fit().update(X, Y).statistics
    with pytest.raises(NonFiniteTrainingDataError, match="Gram matrix .* holds NaN or infinite values"):
        dataclasses.replace(statistics, gram=statistics.gram * math.nan).log_marginal_likelihood()


def test_a_gram_matrix_that_is_not_a_sum_of_squares_does_not_factor():
    statistics = _fit().update(X, Y).statistics
    with pytest.raises(NotPSDError, match="not positive definite"):
        dataclasses.replace(statistics, gram=-statistics.gram).log_marginal_likelihood()


def test_statistics_are_summed_in_float64_for_a_float32_model():
    model = ExactGPModel(
        X.float(),
        Y.float(),
        gpytorch.likelihoods.GaussianLikelihood(),
        ScaleKernel(RandomFourierKernel(8, num_dims=2, seed=0)),
    ).float()
    statistics = StreamingFit.from_model(model).update(X.float(), Y.float()).statistics
    assert statistics.gram.dtype == torch.float64
    torch.testing.assert_close(
        statistics.log_marginal_likelihood(),
        _fit().update(X, Y).statistics.log_marginal_likelihood(),
        rtol=1e-5,
        atol=0,
    )
