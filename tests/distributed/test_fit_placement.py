"""fit_mll with a ShardedMarginalLogLikelihood: the subsample, the refit and the clock agree on every rank, and the
fit reaches the single-process hyperparameters."""

from __future__ import annotations

import gpytorch
import pytest
import torch

import gprf
from gprf.distributed import ShardedMarginalLogLikelihood
from gprf.fitting.budget import RefitCost
from gprf.fitting.row_subsample import subsample_rows
from gprf.settings import feature_chunk_size
from gprf.testing import regression_data
from tests.distributed.conftest import NUM_TRAIN, run_ranks, shard_rows, sharded_model
from tests.helpers.regression import make_model

FIT_OPTIONS = dict(tune_rows=120, tune_features=16, tune_steps=8, finish_steps=3, seed=3)


def _parameters(mll):
    return {name: p.detach().clone() for name, p in mll.named_parameters()}


def _sharded_subsample(rank, world_size, empty_rank):
    model, rows = sharded_model(rank, world_size, empty_rank)
    mll = ShardedMarginalLogLikelihood(model.likelihood, model)
    placement = mll.row_placement
    local = placement.subsample(model, 100, seed=5)
    probed = []

    def probe():  # this rank's rates: rank r measures a Gram rate of r + 1 and a cubic rate of 10 - r
        probed.append(rank)
        return RefitCost(gram_rate=float(rank + 1), cubic_rate=float(10 - rank))

    return {
        "total": placement.num_rows(model),
        "global": local + rows.start,
        "now": placement.now(),
        "cost": placement.refit_cost(model, probe),
        "probed": probed,
    }


@pytest.mark.parametrize(("world_size", "empty_rank"), [(2, None), (3, 0)])
def test_rows_subsample_and_clock_agree_across_ranks(world_size, empty_rank, tmp_path):
    results = run_ranks(_sharded_subsample, world_size, tmp_path, empty_rank)
    assert all(result["total"] == NUM_TRAIN for result in results)
    union = torch.cat([result["global"] for result in results])
    torch.testing.assert_close(union, subsample_rows(NUM_TRAIN, 100, 5, torch.device("cpu")), rtol=0, atol=0)
    assert all(((result["global"] >= 0) & (result["global"] < NUM_TRAIN)).all() for result in results)
    # One clock (rank 0's reading) and the slowest rank's rates on every rank: the Gram rate in the cost of all the
    # rows (rank r forms the sums of its N_r of them), the cubic rate as measured; a rank without rows probes nothing.
    assert len({result["now"] for result in results}) == 1
    counts = [shard_rows(NUM_TRAIN, rank, world_size, empty_rank) for rank in range(world_size)]
    holders = [rank for rank in range(world_size) if rank != empty_rank]
    expected = RefitCost(
        gram_rate=max((rank + 1) * (counts[rank].stop - counts[rank].start) / NUM_TRAIN for rank in holders),
        cubic_rate=float(max(10 - rank for rank in holders)),
    )
    assert all(result["cost"] == expected for result in results)
    assert [result["probed"] for result in results] == [[rank] if rank in holders else [] for rank in range(world_size)]


def _sharded_fit(rank, world_size, empty_rank):
    model, rows = sharded_model(rank, world_size, empty_rank)
    mll = ShardedMarginalLogLikelihood(model.likelihood, model)
    gprf.fit_mll(mll, **FIT_OPTIONS)
    return {
        "parameters": _parameters(mll),
        "training": mll.training,
        "handed over": mll.model.prediction_strategy is not None,
        "bytes": mll.exchange.log.bytes(),
    }


def _single_process_fit(chunk_rows):
    x, y = regression_data(n=NUM_TRAIN)
    model = make_model(x, y, num_features=32)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    with feature_chunk_size(chunk_rows):
        gprf.fit_mll(mll, **FIT_OPTIONS)
    return mll, _parameters(mll)


def _loss_at(mll, parameters):
    with torch.no_grad():
        for name, p in mll.named_parameters():
            p.copy_(parameters[name])
    mll.train()
    model = mll.model
    return -mll(model(*model.train_inputs), model.train_targets).detach()


@pytest.mark.parametrize(("world_size", "empty_rank"), [(2, None), (4, 3)])
def test_fit_mll_reaches_the_single_process_hyperparameters(world_size, empty_rank, tmp_path):
    results = run_ranks(_sharded_fit, world_size, tmp_path, empty_rank)
    mll, expected = _single_process_fit(False)
    assert mll.model.prediction_strategy is not None
    # The fit's end point moves along a flat ridge of the objective (a large outputscale against the constant mean)
    # when only the order of the float64 sums changes: the same fit with the rows summed in chunks of 25 shows by how
    # much, and the ranks' other summation order may move it as far, never much further.
    _, reordered = _single_process_fit(25)
    sensitivity = {name: (reordered[name] - value).abs().max() for name, value in expected.items()}
    expected_loss = _loss_at(mll, expected)
    loss_sensitivity = (_loss_at(mll, reordered) - expected_loss).abs()
    for result in results:
        # In eval mode, with no cache of this rank's rows alone handed to the model (the single-process fit hands its
        # refit's over).
        assert not result["training"] and not result["handed over"]
        for name, value in expected.items():
            deviation = (result["parameters"][name] - value).abs().max()
            assert deviation <= 10 * sensitivity[name] + 1e-12, (name, deviation, sensitivity[name])
        assert (_loss_at(mll, result["parameters"]) - expected_loss).abs() <= 10 * loss_sensitivity + 1e-12
        # Every rank's parameters are bit-for-bit rank 0's: the same summed gradients and the same decisions.
        for name, value in results[0]["parameters"].items():
            assert torch.equal(result["parameters"][name], value)
    start = _parameters(make_model(*regression_data(n=NUM_TRAIN), num_features=32).likelihood)
    assert (expected["likelihood.noise_covar.raw_noise"] - start["noise_covar.raw_noise"]).abs() > 0.1  # it fitted


def _budgeted_fit(rank, world_size, empty_rank):
    # Rank 1 holds twice rank 0's rows: its steps take longer, and its own clock would stop at another step. The
    # budget's probes of the refit's cost run on the ranks with rows.
    model, _ = sharded_model(rank, world_size, empty_rank, n=2000, num_features=64)
    mll = ShardedMarginalLogLikelihood(model.likelihood, model)
    stages = []
    gprf.fit_mll(
        mll,
        time_budget=1.0,
        tune_rows=None,
        tune_features=32,
        tune_steps=10_000,
        finish_steps=0,
        callback=lambda stage, seconds: stages.append(stage),
    )
    return {"stages": stages, "parameters": _parameters(mll)}


@pytest.mark.parametrize(("world_size", "empty_rank"), [(2, None), (3, 1)])
def test_the_time_budget_stops_every_rank_at_the_same_step(world_size, empty_rank, tmp_path):
    first, *others = run_ranks(_budgeted_fit, world_size, tmp_path, empty_rank)
    tuning = [stage for stage in first["stages"] if stage.startswith("tune ")]
    assert 1 <= len(tuning) < 10_000  # the budget, not the step count, ended the tuning
    assert first["stages"][-2:] == ["tune", "scale"]  # the refit ran
    for other in others:
        assert other["stages"] == first["stages"]
        for name, value in first["parameters"].items():
            assert torch.equal(other["parameters"][name], value)
