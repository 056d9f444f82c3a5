"""gprf.exceptions: each warning and error subclasses the builtin it documents (so existing ``except`` clauses and
warning filters catch it) and is raised by the path that documents it."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel
from linear_operator.operators import DenseLinearOperator

import gprf
from gprf.exceptions import (
    DispatchFallbackWarning,
    IndefiniteKernelError,
    LowRankStructureWarning,
    NonFiniteTrainingDataError,
)
from gprf.kernels import RandomFourierKernel
from gprf.prediction import FeatureSpacePredictionStrategy
from tests.kernels.conftest import signed_kernel, signed_model
from tests.prediction.conftest import make_data, make_model


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (DispatchFallbackWarning, RuntimeWarning),
        (IndefiniteKernelError, ValueError),
        (LowRankStructureWarning, UserWarning),
        (NonFiniteTrainingDataError, ValueError),
    ],
)
def test_each_error_subclasses_its_builtin(error, builtin):
    assert issubclass(error, builtin) and error.__doc__


def test_the_errors_users_catch_around_models_are_exported_at_the_top_level():
    for error in (DispatchFallbackWarning, LowRankStructureWarning, NonFiniteTrainingDataError):
        assert getattr(gprf, error.__name__) is error and error.__name__ in gprf.__all__


def test_dispatch_fallback_warning_when_the_covariances_have_no_feature_root():
    """Prediction handed dense covariances falls back to GPyTorch's dense strategy, loudly."""
    x, y = make_data(n=20)
    model = make_model(x, y, num_features=8).eval()
    prior = model.forward(x)
    dense_prior = gpytorch.distributions.MultivariateNormal(prior.mean, DenseLinearOperator(prior.covariance_matrix))
    strategy = FeatureSpacePredictionStrategy([x], dense_prior, y, model.likelihood)
    joint = model.forward(torch.cat([x, x[:2]]))
    covariance = joint.covariance_matrix.detach()
    with pytest.warns(DispatchFallbackWarning, match="falling back"):
        strategy.exact_prediction(
            joint.mean[20:], DenseLinearOperator(covariance[20:, 20:]), DenseLinearOperator(covariance[20:, :20])
        )


def test_low_rank_structure_warning_when_a_dense_kernel_joins_a_feature_kernel():
    with pytest.warns(LowRankStructureWarning, match="dense"):
        RandomFourierKernel(8, num_dims=2, seed=0) + RBFKernel()


def test_indefinite_kernel_error_for_the_marginal_likelihood_of_a_signed_kernel():
    x, y = make_data(n=20)
    model = signed_model(x, y, signed_kernel()).train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    with pytest.raises(IndefiniteKernelError, match="log-determinant"):
        mll(model(x), y)


def test_non_finite_training_data_error_counts_the_rows():
    x, y = make_data(n=20)
    y[[2, 11]] = float("nan")
    model = make_model(x, y, num_features=8).eval()
    with pytest.raises(NonFiniteTrainingDataError, match="^2 of 20 training points"):
        model(x[:2])
