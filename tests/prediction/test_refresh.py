"""gprf.prediction.refresh: training caches rebuilt after the kernel or the likelihood changed, kept otherwise, and
kept for good once a strategy stops following its modules."""

from __future__ import annotations

import torch

from gprf.prediction.refresh import RefreshingPredictionStrategy
from gprf.testing import regression_data
from tests.helpers.regression import make_model


def _noise_of(strategy: RefreshingPredictionStrategy) -> torch.Tensor:
    return strategy.lik_train_train_covar.diagonal(dim1=-2, dim2=-1)[0] - strategy.train_prior_dist.variance[0]


def test_caches_are_rebuilt_after_a_change_and_kept_otherwise():
    x, y = regression_data(n=30)
    model = make_model(x, y).eval()
    model(x[:2] + 0.1)
    strategy = model.prediction_strategy
    assert isinstance(strategy, RefreshingPredictionStrategy)
    covariance, prior = strategy.lik_train_train_covar, strategy.train_prior_dist
    strategy.refresh_if_stale()
    assert strategy.lik_train_train_covar is covariance and strategy.train_prior_dist is prior
    with torch.no_grad():
        model.likelihood.raw_noise.add_(1.0)
        model.covar_module.raw_outputscale.sub_(0.5)
    strategy.refresh_if_stale()
    assert strategy.train_prior_dist is not prior and strategy.train_prior_dist.mean is prior.mean
    with torch.no_grad():
        torch.testing.assert_close(_noise_of(strategy), model.likelihood.noise.squeeze())
        torch.testing.assert_close(strategy.train_prior_dist.variance, model.covar_module(x, diag=True))


def test_a_strategy_that_stopped_following_keeps_its_caches():
    x, y = regression_data(n=30)
    model = make_model(x, y).eval()
    model(x[:2] + 0.1)
    strategy = model.prediction_strategy
    covariance = strategy.lik_train_train_covar
    strategy.stop_following()
    with torch.no_grad():
        model.likelihood.raw_noise.add_(1.0)
    strategy.refresh_if_stale()
    assert strategy.lik_train_train_covar is covariance
