"""sharded_predictor: every rank holds the posterior of all the rows and predicts its own test points as one process
holding all of them would."""

from __future__ import annotations

import gpytorch
import pytest
import torch

from gprf.distributed import sharded_predictor
from gprf.distributed.exchange import ShardExchange
from gprf.distributed.prediction import sharded_statistics
from gprf.streaming import StreamingFit
from gprf.testing import regression_data
from tests.distributed.conftest import NUM_TRAIN, run_ranks, shard_rows, sharded_model
from tests.helpers.regression import make_model

NUM_TEST = 30


def _test_points():
    return torch.rand(NUM_TEST, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64)


def _predict(rank, world_size, empty_rank, fixed_noise):
    options = {}
    x, y = regression_data(n=NUM_TRAIN)
    rows = shard_rows(NUM_TRAIN, rank, world_size, empty_rank)
    if fixed_noise:
        noise = torch.linspace(0.01, 0.1, NUM_TRAIN, dtype=torch.float64)
        options["likelihood"] = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise[rows])
    model, _ = sharded_model(rank, world_size, empty_rank, **options)
    predictor = sharded_predictor(model, chunk_size=17)
    test_rows = shard_rows(NUM_TEST, rank, world_size)  # each rank predicts its own test points
    mean, variance = predictor.predict(_test_points()[test_rows], chunk_size=7)
    return {"mean": mean, "variance": variance, "factor": predictor.posterior.factor.cholesky}


@pytest.mark.parametrize(
    ("world_size", "empty_rank", "fixed_noise"),
    [(1, None, False), (2, None, False), (2, None, True), (4, 1, False)],
    ids=["1-rank", "2-ranks", "2-ranks-fixed-noise", "4-ranks-one-empty"],
)
def test_each_rank_predicts_its_test_points_as_one_process(world_size, empty_rank, fixed_noise, tmp_path):
    results = run_ranks(_predict, world_size, tmp_path, empty_rank, fixed_noise)
    x, y = regression_data(n=NUM_TRAIN)
    options = {}
    if fixed_noise:
        noise = torch.linspace(0.01, 0.1, NUM_TRAIN, dtype=torch.float64)
        options["likelihood"] = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise)
    model = make_model(x, y, num_features=32, **options).eval()
    with torch.no_grad():
        posterior = model(_test_points())
    mean = torch.cat([result["mean"] for result in results])
    variance = torch.cat([result["variance"] for result in results])
    torch.testing.assert_close(mean, posterior.mean, rtol=0, atol=1e-10)
    torch.testing.assert_close(variance, posterior.variance, rtol=0, atol=1e-10)
    for result in results:  # the same F x F factor on every rank
        assert torch.equal(result["factor"], results[0]["factor"])


def _statistics(rank, world_size):
    model, _ = sharded_model(rank, world_size)
    return {"statistics": sharded_statistics(model, ShardExchange())}


def test_sharded_statistics_are_the_single_process_statistics(tmp_path):
    results = run_ranks(_statistics, 3, tmp_path)
    x, y = regression_data(n=NUM_TRAIN)
    single = StreamingFit.from_model(make_model(x, y, num_features=32)).update(x, y).statistics
    for result in results:
        statistics = result["statistics"]
        for name in ("gram", "rhs", "quadratic", "log_noise", "num_data"):
            torch.testing.assert_close(getattr(statistics, name), getattr(single, name), rtol=0, atol=1e-10)
        torch.testing.assert_close(
            statistics.log_marginal_likelihood(), single.log_marginal_likelihood(), rtol=0, atol=1e-9
        )


def _bad_chunk(rank, world_size):
    model, _ = sharded_model(rank, world_size)
    try:
        sharded_predictor(model, chunk_size=0)
    except ValueError as error:
        return {"message": str(error)}
    return {"message": ""}


def test_chunk_size_is_checked(tmp_path):
    (result,) = run_ranks(_bad_chunk, 1, tmp_path)
    assert result["message"] == "chunk_size must be a positive integer, got 0."
