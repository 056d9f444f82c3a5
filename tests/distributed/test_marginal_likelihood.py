"""ShardedMarginalLogLikelihood: the whole data's value and gradients on every rank, to rounding."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.priors import GammaPrior

from gprf.distributed import ShardedMarginalLogLikelihood
from gprf.distributed.exchange import HEADER_SIZE
from gprf.settings import feature_chunk_size
from gprf.testing import regression_data
from tests.distributed.conftest import (
    BACKENDS,
    NUM_TRAIN,
    backend_world_size,
    rank_device,
    run_ranks,
    sharded_model,
)
from tests.helpers.regression import make_model


def _with_prior(model):
    # A prior counts once in the objective, however many ranks evaluate it.
    model.covar_module.register_prior("outputscale_prior", GammaPrior(2.0, 0.5), "raw_outputscale")
    return model


def _value_and_gradients(mll, model, x, y):
    model.train()
    loss = -mll(model(x), y)
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in mll.named_parameters() if p.grad is not None}


def _sharded_loss(rank, world_size, empty_rank, chunk_rows, backend="gloo"):
    device = rank_device(backend, rank)
    model, rows = sharded_model(rank, world_size, empty_rank)
    model = _with_prior(model).to(device)
    x, y = (value.to(device) for value in regression_data(n=NUM_TRAIN))
    model.set_train_data(x[rows], y[rows], strict=False)
    mll = ShardedMarginalLogLikelihood(model.likelihood, model)
    with feature_chunk_size(chunk_rows):
        loss, grads = _value_and_gradients(mll, model, x[rows], y[rows])
    return {"loss": loss, "grads": grads, "bytes": mll.exchange.log.bytes(), "steps": mll.exchange.log.steps()}


def _single_process_value_and_gradients(device=torch.device("cpu")):
    x, y = regression_data(n=NUM_TRAIN)
    model = _with_prior(make_model(x, y, num_features=32)).to(device)  # the training data moves with the model
    x, y = x.to(device), y.to(device)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    return _value_and_gradients(mll, model, x, y)


@pytest.mark.parametrize(
    ("world_size", "empty_rank", "chunk_rows"),
    [(1, None, False), (2, None, False), (2, None, 25), (4, 2, 25)],
    ids=["1-rank", "2-ranks", "2-ranks-chunked", "4-ranks-chunked-one-empty"],
)
def test_value_and_gradients_equal_the_single_process_ones(world_size, empty_rank, chunk_rows, tmp_path):
    results = run_ranks(_sharded_loss, world_size, tmp_path, empty_rank, chunk_rows)
    loss, grads = _single_process_value_and_gradients()
    assert len(grads) == 4  # noise, constant mean, outputscale and the lengthscales: every one reached
    for result in results:
        torch.testing.assert_close(result["loss"], loss, rtol=0, atol=1e-10)
        assert result["grads"].keys() == grads.keys()
        for name, grad in grads.items():
            torch.testing.assert_close(result["grads"][name], grad, rtol=0, atol=1e-10)
        assert result["steps"] == ["marginal likelihood", "marginal likelihood gradient"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_gives_the_single_process_value_and_gradients(backend, tmp_path):
    world_size = backend_world_size(backend)
    results = run_ranks(_sharded_loss, world_size, tmp_path, None, 25, backend, backend=backend)
    # The reference is one process on the ranks' device type (float64 throughout: the 1e-10 tolerance holds).
    loss, grads = _single_process_value_and_gradients(rank_device(backend, 0))
    assert len(results) == world_size and len(grads) == 4
    for result in results:
        assert result["steps"] == ["marginal likelihood", "marginal likelihood gradient"]
        torch.testing.assert_close(result["loss"], loss.cpu(), rtol=0, atol=1e-10)
        assert result["grads"].keys() == grads.keys()
        for name, grad in grads.items():
            torch.testing.assert_close(result["grads"][name], grad.cpu(), rtol=0, atol=1e-10)


def test_communicated_bytes_per_step_follow_the_formula(tmp_path):
    world_size, features, gradients = 2, 32, 6  # noise, constant, outputscale and three lengthscales
    results = run_ranks(_sharded_loss, world_size, tmp_path, None, False)
    sums = features * (features + 1) // 2 + features + 2  # lower triangle of G, b, q and sum(log noise)
    fingerprints = world_size * (features + 2)  # every rank's slot of the all-reduce
    headers = 2 * HEADER_SIZE  # forward and backward
    for result in results:
        assert result["bytes"] == 8 * (headers + sums + fingerprints + gradients)


def _mismatched(rank, world_size, case):
    options = {
        "seed": dict(seed=rank),
        "features": dict(num_features=32 + 16 * rank),
    }.get(case, {})
    model, rows = sharded_model(rank, world_size, **options)
    x, y = regression_data(n=NUM_TRAIN)
    x, y = x[rows], y[rows]
    if case == "lengthscale" and rank == 1:
        model.covar_module.base_kernel.lengthscale = 0.5
    if case == "noise" and rank == 1:
        model.likelihood.noise = 0.06
    if case == "dtype" and rank == 1:
        model, x, y = model.float(), x.float(), y.float()
    if case == "targets" and rank == 1:
        y = y[:-1]  # a shape error in this rank's own part
    mll = ShardedMarginalLogLikelihood(model.likelihood, model)
    model.train()
    try:
        mll(model(x), y)
    except Exception as error:
        return {"kind": type(error).__name__, "message": str(error), "notes": getattr(error, "__notes__", [])}
    return {"kind": None}


@pytest.mark.parametrize(
    ("case", "kind", "fragment"),
    [
        ("seed", "ShardMismatchError", "rank 1 has other random features or kernel hyperparameters than rank 0"),
        ("lengthscale", "ShardMismatchError", "rank 1 has other random features or kernel hyperparameters"),
        ("noise", "ShardMismatchError", "rank 1 has other likelihood noise than rank 0"),
        ("features", "ShardMismatchError", "the number of features is 48 on rank 1 but 32 on rank 0"),
        ("dtype", "ShardMismatchError", "the model dtype is torch.float32 on rank 1 but torch.float64 on rank 0"),
        ("targets", "RuntimeError", "size of tensor a"),
    ],
)
def test_ranks_that_disagree_get_one_clear_error_on_every_rank(case, kind, fragment, tmp_path):
    results = run_ranks(_mismatched, 2, tmp_path, case)
    for result in results:
        assert result["kind"] == kind
        assert fragment in result["message"]
    if case == "targets":  # rank 0 raises rank 1's error, saying so
        assert results[0]["notes"] == ["Raised on rank 1 in the step 'marginal likelihood'; rank 0 stops with it."]


def _skipped_backward(rank, world_size):
    model, rows = sharded_model(rank, world_size)
    x, y = regression_data(n=NUM_TRAIN)
    mll = ShardedMarginalLogLikelihood(model.likelihood, model)
    model.train()
    loss = -mll(model(x[rows]), y[rows])
    try:
        if rank == 0:
            loss.backward()
        else:  # forgets the backward pass and evaluates again
            mll(model(x[rows]), y[rows])
    except Exception as error:
        return {"kind": type(error).__name__, "message": str(error)}
    return {"kind": None}


def test_a_rank_that_skips_the_backward_pass_stops_every_rank(tmp_path):
    for result in run_ranks(_skipped_backward, 2, tmp_path):
        assert result["kind"] == "ShardMismatchError"
        assert "rank 0 at 'marginal likelihood gradient', rank 1 at 'marginal likelihood'" in result["message"]


def test_refuses_models_without_a_feature_kernel():
    x, y = regression_data(n=20)
    model = make_model(x, y)
    model.covar_module = gpytorch.kernels.RBFKernel()
    with pytest.raises(TypeError, match="gprf random-feature kernel"):
        ShardedMarginalLogLikelihood(model.likelihood, model)
