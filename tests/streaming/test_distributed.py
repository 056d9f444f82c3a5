"""all_reduce_statistics over gloo with several local processes equals the single-process statistics."""

from __future__ import annotations

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from gprf.streaming import StreamingFit, all_reduce_statistics, iterate_chunks
from gprf.testing import regression_data
from tests.helpers.regression import make_model

NUM_TRAIN = 240
SUMMED = ("gram", "rhs", "quadratic", "log_noise", "num_data")


def statistics_of(x, y, seed=0):
    model = make_model(x, y, num_features=32, seed=seed)
    return StreamingFit.from_model(model).fit(iterate_chunks(x, y, chunk_size=50)).statistics


def _worker(rank: int, world_size: int, init_file: str, out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    try:
        x, y = regression_data(n=NUM_TRAIN)
        # Uneven shards: the sums must not depend on how the points are split.
        shard = torch.tensor_split(torch.arange(NUM_TRAIN), [NUM_TRAIN // 4 * (r + 1) for r in range(world_size - 1)])[
            rank
        ]
        total = all_reduce_statistics(statistics_of(x[shard], y[shard]))
        try:  # ranks that drew different features must be refused, on every rank
            all_reduce_statistics(statistics_of(x[shard], y[shard], seed=rank))
            refused = False
        except ValueError as error:
            refused = "different random features" in str(error)
        result = {name: getattr(total, name) for name in SUMMED}
        result.update(refused=refused, log_marginal_likelihood=total.log_marginal_likelihood())
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world_size", [2, 3])
def test_all_reduce_equals_single_process(world_size, tmp_path):
    # Forked workers inherit the imported modules (a spawned one re-imports torch and gpytorch: seconds each);
    # forking is safe here as for DataLoader workers, torch resets its thread pools in the child.
    mp.start_processes(
        _worker,
        args=(world_size, str(tmp_path / "store"), str(tmp_path)),
        nprocs=world_size,
        join=True,
        start_method="fork",
    )
    x, y = regression_data(n=NUM_TRAIN)
    single = statistics_of(x, y)
    for rank in range(world_size):
        result = torch.load(tmp_path / f"rank{rank}.pt")
        assert result["refused"]
        for name in SUMMED:
            torch.testing.assert_close(result[name], getattr(single, name), rtol=0, atol=1e-10)
        torch.testing.assert_close(
            result["log_marginal_likelihood"], single.log_marginal_likelihood(), rtol=0, atol=1e-10
        )


def test_needs_an_initialised_process_group():
    x, y = regression_data(n=20)
    with pytest.raises(RuntimeError, match="init_process_group"):
        all_reduce_statistics(statistics_of(x, y))
    with pytest.raises(TypeError, match="SufficientStatistics"):
        all_reduce_statistics({"gram": torch.eye(2)})
