"""Thompson sampling with rows and candidates sharded over ranks: the same paths and the same batch on every rank,
and the batch one process with all of them draws from rank 0's random state."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("botorch")

from botorch.models.transforms import Normalize, Standardize
from botorch.sampling.pathwise import draw_matheron_paths

from gprf.botorch import RandomFeatureSingleTaskGP, sharded_matheron_paths, sharded_thompson_sample, thompson_sample
from tests.botorch.conftest import branin_like
from tests.distributed.conftest import run_ranks, shard_rows

NUM_TRAIN, NUM_CANDIDATES, NUM_SAMPLES, DIM = 60, 40, 6, 3


def _data():
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(NUM_TRAIN, DIM, generator=generator, dtype=torch.float64)
    candidates = torch.rand(NUM_CANDIDATES, DIM, generator=generator, dtype=torch.float64)
    return x, branin_like(x, 1), candidates


def _model(rows, outcome_transform=None):
    x, y, _ = _data()
    bounds = torch.tensor([[0.0] * DIM, [1.0] * DIM], dtype=torch.float64)
    return RandomFeatureSingleTaskGP(
        x[rows],
        y[rows],
        num_features=32,
        seed=0,
        input_transform=Normalize(DIM, bounds=bounds),
        outcome_transform=outcome_transform,
    )


def _sample(rank, world_size, empty_rank):
    model = _model(shard_rows(NUM_TRAIN, rank, world_size, empty_rank))
    _, _, candidates = _data()
    # Only rank 0's random state matters: the others' draws are replaced by rank 0's.
    torch.manual_seed(123 if rank == 0 else 1000 + rank)
    paths = sharded_matheron_paths(model, torch.Size([NUM_SAMPLES]))
    with torch.no_grad():
        values = paths(candidates)
    torch.manual_seed(321 if rank == 0 else 2000 + rank)
    batch = sharded_thompson_sample(model, candidates[shard_rows(NUM_CANDIDATES, rank, world_size, empty_rank)], 4)
    return {"values": values, "batch": batch}


@pytest.mark.parametrize(("world_size", "empty_rank"), [(1, None), (2, None), (3, 1)])
def test_paths_and_batches_are_those_of_one_process(world_size, empty_rank, tmp_path):
    results = run_ranks(_sample, world_size, tmp_path, empty_rank)
    model = _model(slice(None))
    _, _, candidates = _data()
    torch.manual_seed(123)
    with torch.no_grad():
        values = draw_matheron_paths(model, sample_shape=torch.Size([NUM_SAMPLES]))(candidates)
    torch.manual_seed(321)
    batch = thompson_sample(model, candidates, 4)
    for result in results:
        torch.testing.assert_close(result["values"], values, rtol=0, atol=1e-9)
        assert torch.equal(result["batch"], batch)


def _standardized_per_shard(rank, world_size):
    model = _model(shard_rows(NUM_TRAIN, rank, world_size), outcome_transform=Standardize(1))
    try:
        sharded_matheron_paths(model, torch.Size([2]))
    except Exception as error:
        return {"kind": type(error).__name__, "message": str(error)}
    return {"kind": None}


def test_outcome_transforms_fitted_to_each_shard_are_refused(tmp_path):
    for result in run_ranks(_standardized_per_shard, 2, tmp_path):
        assert result["kind"] == "ShardMismatchError"
        assert "rank 1 has other input or outcome transforms than rank 0" in result["message"]


def _bad_candidates(rank, world_size, case):
    model = _model(shard_rows(NUM_TRAIN, rank, world_size))
    _, _, candidates = _data()
    mine = candidates[shard_rows(NUM_CANDIDATES, rank, world_size)]
    count = 4
    if case == "nan" and rank == 1:
        mine = mine.clone()
        mine[0, 0] = float("nan")
    if case == "too many":
        count = NUM_CANDIDATES + 1
    try:
        sharded_thompson_sample(model, mine, count)
    except Exception as error:
        return {"kind": type(error).__name__, "message": str(error)}
    return {"kind": None}


@pytest.mark.parametrize(
    ("case", "fragment"),
    [("nan", "candidates hold NaN"), ("too many", f"at most the {NUM_CANDIDATES} candidates of all ranks, got 41")],
)
def test_bad_candidates_on_one_rank_stop_every_rank(case, fragment, tmp_path):
    for result in run_ranks(_bad_candidates, 2, tmp_path, case):
        assert result["kind"] == "ValueError" and fragment in result["message"]
