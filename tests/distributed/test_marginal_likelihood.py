"""ShardedMarginalLogLikelihood: the whole data's value and gradients on every rank, to rounding."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.priors import GammaPrior

from gprf.distributed import ShardedMarginalLogLikelihood
from gprf.settings import feature_chunk_size
from tests.distributed.conftest import NUM_TRAIN, run_ranks, sharded_model
from tests.prediction.conftest import make_data, make_model


def _with_prior(model):
    # A prior counts once in the objective, however many ranks evaluate it.
    model.covar_module.register_prior("outputscale_prior", GammaPrior(2.0, 0.5), "raw_outputscale")
    return model


def _value_and_gradients(mll, model, x, y):
    model.train()
    loss = -mll(model(x), y)
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in mll.named_parameters() if p.grad is not None}


def _sharded_loss(rank, world_size, empty_rank, chunk_rows):
    model, rows = sharded_model(rank, world_size, empty_rank)
    _with_prior(model)
    x, y = make_data(n=NUM_TRAIN)
    mll = ShardedMarginalLogLikelihood(model.likelihood, model)
    with feature_chunk_size(chunk_rows):
        loss, grads = _value_and_gradients(mll, model, x[rows], y[rows])
    return {"loss": loss, "grads": grads, "bytes": mll.exchange.log.bytes(), "steps": mll.exchange.log.steps()}


@pytest.mark.parametrize(
    ("world_size", "empty_rank", "chunk_rows"),
    [(1, None, False), (2, None, False), (2, None, 25), (4, 2, 25)],
    ids=["1-rank", "2-ranks", "2-ranks-chunked", "4-ranks-chunked-one-empty"],
)
def test_value_and_gradients_equal_the_single_process_ones(world_size, empty_rank, chunk_rows, tmp_path):
    results = run_ranks(_sharded_loss, world_size, tmp_path, empty_rank, chunk_rows)
    x, y = make_data(n=NUM_TRAIN)
    model = _with_prior(make_model(x, y, num_features=32))
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    loss, grads = _value_and_gradients(mll, model, x, y)
    assert len(grads) == 4  # noise, constant mean, outputscale and the lengthscales: every one reached
    for result in results:
        torch.testing.assert_close(result["loss"], loss, rtol=0, atol=1e-10)
        assert result["grads"].keys() == grads.keys()
        for name, grad in grads.items():
            torch.testing.assert_close(result["grads"][name], grad, rtol=0, atol=1e-10)
        assert result["steps"] == ["marginal likelihood", "marginal likelihood gradient"]
