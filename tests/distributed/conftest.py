"""Helpers of the distributed tests: ranks as forked processes with a gloo process group, each test bounded in time.

Forked workers inherit the imported modules (a spawned one re-imports torch and gpytorch: seconds each); forking is
safe here as for DataLoader workers, torch resets its thread pools in the child. NCCL ranks (one GPU each) are spawned
instead: CUDA cannot be used in a forked child. Every run has a deadline: ranks still running then are terminated and
the test fails (no test can hang), and the process group's own timeout is short so that a collective some rank never
reaches fails within seconds.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch._dynamo  # torch's optimizers import it on first use (seconds): once here, before the forks
import torch.distributed as dist
import torch.multiprocessing as mp

from gprf.testing import regression_data
from tests.helpers.regression import make_model

#: Seconds a whole run of ranks may take (the machine running the suite may have two busy cores).
RUN_TIMEOUT = 120.0
#: The process group's timeout: how long a collective waits for a rank that never comes.
GROUP_TIMEOUT = datetime.timedelta(seconds=20)
NUM_TRAIN = 240
NUM_FEATURES = 32
#: The backends the collective tests run on: gloo with CPU ranks here, NCCL with one GPU per rank wherever CUDA and
#: NCCL are available (``pytest -k nccl`` selects it).
BACKENDS = [
    pytest.param("gloo", id="gloo-cpu"),
    pytest.param(
        "nccl",
        id="nccl-cuda",
        marks=pytest.mark.skipif(
            not (torch.cuda.is_available() and dist.is_nccl_available()),
            reason="the NCCL variant needs a CUDA GPU and a torch built with NCCL",
        ),
    ),
]


def backend_world_size(backend: str) -> int:
    """Ranks of a two-rank test on ``backend``: two, but under NCCL no more than the GPUs (NCCL allows one rank per
    device, so one GPU gives one NCCL rank, still summing through NCCL's collectives)."""
    return min(2, torch.cuda.device_count()) if backend == "nccl" else 2


def rank_device(backend: str, rank: int) -> torch.device:
    """The device of rank ``rank``'s model: its own GPU under NCCL, else the CPU."""
    return torch.device("cuda", rank) if backend == "nccl" else torch.device("cpu")


def _rank_main(rank, world_size, folder, timeout, backend, worker, args):
    torch.set_num_threads(1)
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(
        backend, init_method=f"file://{folder}/store", rank=rank, world_size=world_size, timeout=timeout
    )
    try:
        result = worker(rank, world_size, *args)
        torch.save(result, os.path.join(folder, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def run_ranks(
    worker: Callable[..., dict],
    world_size: int,
    folder: Path,
    *args,
    group_timeout=GROUP_TIMEOUT,
    backend: str = "gloo",
) -> list[dict]:
    """``worker(rank, world_size, *args)`` on ``world_size`` ranks of a ``backend`` group (gloo: forked CPU
    processes; NCCL: spawned, one GPU each); the dict each returns (on the CPU), by rank.

    A rank that raises fails the test with its traceback; ranks still running after :data:`RUN_TIMEOUT` seconds are
    terminated and the test fails.
    """
    folder.mkdir(parents=True, exist_ok=True)
    context = mp.start_processes(
        _rank_main,
        args=(world_size, str(folder), group_timeout, backend, worker, args),
        nprocs=world_size,
        join=False,
        start_method="fork" if backend == "gloo" else "spawn",
    )
    deadline = time.monotonic() + RUN_TIMEOUT
    while not context.join(timeout=max(deadline - time.monotonic(), 0.0)):
        if time.monotonic() >= deadline:
            for process in context.processes:
                process.terminate()
            pytest.fail(f"the {world_size} ranks did not finish within {RUN_TIMEOUT:.0f} s")
    # The results are this test's own objects (e.g. SufficientStatistics), written by its own ranks.
    return [torch.load(folder / f"rank{rank}.pt", weights_only=False, map_location="cpu") for rank in range(world_size)]


def shard_rows(num_rows: int, rank: int, world_size: int, empty_rank: int | None = None) -> slice:
    """Rank ``rank``'s contiguous block of rows: uneven blocks, and none at all on ``empty_rank``."""
    holders = [r for r in range(world_size) if r != empty_rank]
    if rank == empty_rank:
        return slice(0, 0)
    position = holders.index(rank)
    # Uneven: block sizes grow with the position (1, 2, 3, ... parts).
    weights = list(range(1, len(holders) + 1))
    bounds = [num_rows * sum(weights[:i]) // sum(weights) for i in range(len(holders) + 1)]
    return slice(bounds[position], bounds[position + 1])


def sharded_model(rank: int, world_size: int, empty_rank: int | None = None, n: int = NUM_TRAIN, **options):
    """The test model on rank ``rank``'s rows of the shared data set, and those rows."""
    x, y = regression_data(n=n)
    rows = shard_rows(n, rank, world_size, empty_rank)
    return make_model(x[rows], y[rows], num_features=options.pop("num_features", NUM_FEATURES), **options), rows
