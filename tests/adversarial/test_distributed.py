"""Adversarial use of :mod:`gprf.distributed` and the sharded BoTorch entry points, in a process group of one (what
every rank of a larger group must also accept or refuse): no process group, objects that are not models, dense
kernels, and the sharded objects' answers against the single-process ones."""

from __future__ import annotations

import math

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

import gprf
import gprf.distributed as distributed
from gprf.botorch import RandomFeatureSingleTaskGP, sharded_matheron_paths, sharded_thompson_sample
from gprf.kernels import RandomFourierKernel
from gprf.testing import ExactGPModel, regression_data

X, Y = regression_data(n=60, d=2)


def _model(kernel=None):
    kernel = kernel or ScaleKernel(RandomFourierKernel(16, num_dims=2, seed=0))
    return ExactGPModel(X, Y, gpytorch.likelihoods.GaussianLikelihood(), kernel).double()


@pytest.mark.parametrize(
    "call",
    [
        lambda: distributed.ShardedMarginalLogLikelihood(_model().likelihood, _model()),
        lambda: distributed.sharded_predictor(_model()),
        lambda: distributed.broadcast_state(_model()),
        lambda: distributed.ShardExchange(),
    ],
)
def test_without_a_process_group_the_error_names_init_process_group(call):
    with pytest.raises(RuntimeError, match=r"torch.distributed is not initialised: call .*init_process_group"):
        call()


def test_broadcast_state_refuses_what_is_not_a_module():
    with pytest.raises(TypeError, match="broadcast_state takes a torch.nn.Module, got int"):
        distributed.broadcast_state(5)


def test_the_sharded_marginal_likelihood_refuses_a_dense_kernel(group_of_one):
    dense = _model(RBFKernel())
    with pytest.raises(TypeError, match="needs an ExactGP whose covar_module is a gprf random-feature kernel"):
        distributed.ShardedMarginalLogLikelihood(dense.likelihood, dense)


def test_one_shard_is_the_whole_marginal_likelihood(group_of_one):
    model = _model().train()
    sharded = distributed.ShardedMarginalLogLikelihood(model.likelihood, model)
    plain = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    torch.testing.assert_close(sharded(model(X), Y), plain(model(X), Y), rtol=1e-12, atol=1e-12)


def test_fit_mll_takes_the_sharded_marginal_likelihood(group_of_one):
    """Its own row placement makes it the exact marginal likelihood of the whole data for fit_mll."""
    model = _model()
    mll = gprf.fit_mll(distributed.ShardedMarginalLogLikelihood(model.likelihood, model), tune_steps=2)
    assert not mll.training


@pytest.mark.parametrize(
    ("model", "kwargs", "error", "match"),
    [
        (5, {}, TypeError, "sharded_predictor takes a GPyTorch ExactGP .* got int"),
        ("model", {"chunk_size": 0}, ValueError, "chunk_size must be a positive integer, got 0"),
        ("dense", {}, TypeError, "dense kernels have no finite sufficient statistics"),
    ],
)
def test_the_sharded_predictor_refuses_bad_arguments(group_of_one, model, kwargs, error, match):
    model = {"model": _model, "dense": lambda: _model(RBFKernel())}.get(model, lambda: model)()
    with pytest.raises(error, match=match):
        distributed.sharded_predictor(model, **kwargs)


def test_one_shard_predicts_as_the_model(group_of_one):
    model = _model()
    mean, variance = distributed.sharded_predictor(model).predict(X[:4])
    model.eval()
    with torch.no_grad():
        expected = model(X[:4])
    torch.testing.assert_close((mean, variance), (expected.mean, expected.variance), rtol=1e-9, atol=1e-12)


def _botorch_model():
    x = torch.rand(12, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return RandomFeatureSingleTaskGP(x, x.sum(-1, keepdim=True), num_features=16, seed=0)


@pytest.mark.parametrize(
    ("candidates", "num_samples", "match"),
    [
        (torch.rand(10, 3, dtype=torch.float64), 0, "num_samples must be a positive integer, got 0"),
        (torch.full((10, 3), math.nan, dtype=torch.float64), 2, "candidates hold NaN"),
        (torch.rand(10, 2, dtype=torch.float64), 2, "candidates have 2 columns; the model's inputs have 3"),
        (torch.rand(0, 3, dtype=torch.float64), 1, "num_samples must be at most the 0 candidates of all ranks"),
    ],
)
def test_sharded_thompson_sampling_refuses_bad_candidates(group_of_one, candidates, num_samples, match):
    with pytest.raises(ValueError, match=match):
        sharded_thompson_sample(_botorch_model(), candidates, num_samples)


def test_sharded_thompson_sampling_returns_distinct_candidates(group_of_one):
    candidates = torch.rand(5, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    chosen = sharded_thompson_sample(_botorch_model(), candidates, 5)
    assert sorted(map(tuple, chosen.tolist())) == sorted(map(tuple, candidates.tolist()))


def test_sharded_paths_refuse_an_int_sample_shape(group_of_one):
    with pytest.raises(TypeError, match="sample_shape must be a torch.Size"):
        sharded_matheron_paths(_botorch_model(), 2)
