"""broadcast_state and checkpoints: rank 0's model on every rank, on any number of ranks."""

from __future__ import annotations

import pytest
import torch

from gprf.distributed import ShardedMarginalLogLikelihood, broadcast_state, sharded_predictor
from gprf.testing import regression_data
from tests.distributed.conftest import NUM_TRAIN, run_ranks, sharded_model


def _broadcast(rank, world_size, case):
    model, _ = sharded_model(rank, world_size, seed=rank, num_features=32 + 16 * (case == "features" and rank == 1))
    model.likelihood.noise = 0.05 + 0.01 * rank
    try:
        broadcast_state(model)
    except Exception as error:
        return {"kind": type(error).__name__, "message": str(error)}
    return {"kind": None, "state": model.state_dict()}


def test_every_rank_gets_rank_zeros_model(tmp_path):
    results = run_ranks(_broadcast, 3, tmp_path, "seeds")
    reference, _ = sharded_model(0, 3, seed=0)
    reference.likelihood.noise = 0.05
    for result in results:
        assert result["kind"] is None
        for name, value in reference.state_dict().items():
            assert torch.equal(result["state"][name], value), name


def test_models_of_another_structure_are_refused_on_every_rank(tmp_path):
    for result in run_ranks(_broadcast, 2, tmp_path, "features"):
        assert result["kind"] == "ShardMismatchError"
        assert "the number of state values is" in result["message"]


def test_broadcast_state_takes_a_module():
    with pytest.raises(TypeError, match="torch.nn.Module"):
        broadcast_state({"weight": torch.zeros(1)})


def _train_and_save(rank, world_size, path):
    model, rows = sharded_model(rank, world_size)
    x, y = regression_data(n=NUM_TRAIN)
    mll = ShardedMarginalLogLikelihood(model.likelihood, model)
    optimizer = torch.optim.Adam(mll.parameters(), lr=0.05)
    model.train()
    for _ in range(5):
        optimizer.zero_grad()
        (-mll(model(x[rows]), y[rows])).backward()
        optimizer.step()
    if rank == 0:
        torch.save(model.state_dict(), path)
    return {}


def _restore(rank, world_size, path):
    model, rows = sharded_model(rank, world_size, seed=rank + 5)  # other draws: the checkpoint replaces them
    model.load_state_dict(torch.load(path))
    x, y = regression_data(n=NUM_TRAIN)
    mll = ShardedMarginalLogLikelihood(model.likelihood, model)
    model.train()
    with torch.no_grad():
        value = mll(model(x[rows]), y[rows])
    mean, variance = sharded_predictor(model).predict(x[:10])
    return {"value": value, "mean": mean, "variance": variance}


def test_a_checkpoint_of_rank_zero_restores_the_model_on_any_number_of_ranks(tmp_path):
    path = tmp_path / "checkpoint.pt"
    run_ranks(_train_and_save, 2, tmp_path / "train", str(path))
    restored = {size: run_ranks(_restore, size, tmp_path / f"restore{size}", str(path)) for size in (1, 3)}
    reference = restored[1][0]
    for results in restored.values():
        for result in results:
            for name in ("value", "mean", "variance"):
                torch.testing.assert_close(result[name], reference[name], rtol=0, atol=1e-10)
