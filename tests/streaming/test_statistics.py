"""gprf.streaming.statistics: SufficientStatistics — the exact log marginal likelihood and weight posterior from the
sums, merging (refused across different features, noise or mean), and moving between devices."""

from __future__ import annotations

import pytest
import torch

from gprf.linalg import covariance_root
from gprf.streaming import StreamingFit, StreamingPredictor, SufficientStatistics, iterate_chunks
from gprf.testing import regression_data
from tests.helpers.regression import make_model
from tests.streaming.conftest import NUM_TRAIN


def test_log_marginal_likelihood_matches_dense_gaussian(float64):
    x, y = regression_data(n=NUM_TRAIN)
    model = make_model(x, y, num_features=32)
    statistics = StreamingFit.from_model(model).fit(iterate_chunks(x, y, chunk_size=64)).statistics
    with torch.no_grad():
        root = covariance_root(model.covar_module, x).scaled_features()
        covariance = root @ root.mT + model.likelihood.noise * torch.eye(NUM_TRAIN)
        expected = torch.distributions.MultivariateNormal(model.mean_module(x), covariance).log_prob(y)
    torch.testing.assert_close(statistics.log_marginal_likelihood(), expected, rtol=1e-10, atol=1e-8)


def test_statistics_move_between_devices(device):
    x, y = regression_data(n=50)
    model = make_model(x, y, num_features=16)
    statistics = StreamingFit.from_model(model).update(x, y).statistics
    moved = statistics.to(device)
    assert isinstance(moved, SufficientStatistics) and moved.gram.device.type == device.type
    assert moved.gram.dtype == torch.float64 and moved.input_dim == 3
    torch.testing.assert_close(moved.to("cpu").gram, statistics.gram, rtol=0, atol=0)


def test_posterior_is_the_dense_weight_posterior():
    """N(C^-1 b, C^-1) with C = I + G, G = R^T R / s2 and b = R^T (y - mu) / s2 (R the scaled root)."""
    x, y = regression_data(n=NUM_TRAIN)
    model = make_model(x, y, num_features=16)
    statistics = StreamingFit.from_model(model).update(x, y).statistics
    with torch.no_grad():
        root = covariance_root(model.covar_module, x).scaled_features()
        noise = model.likelihood.noise
        capacitance = torch.eye(16, dtype=torch.float64) + root.mT @ root / noise
        rhs = root.mT @ (y - model.mean_module(x)) / noise
    posterior = statistics.posterior()
    torch.testing.assert_close(posterior.mean, torch.linalg.solve(capacitance, rhs), rtol=1e-10, atol=1e-10)
    assert statistics.root_dim == 16


def test_merging_adds_the_sums_of_the_same_features_only():
    x, y = regression_data(n=40)
    model = make_model(x, y, num_features=16, seed=0)
    first, second = (
        StreamingFit.from_model(model).update(x[part], y[part]).statistics for part in (slice(0, 25), slice(25, None))
    )
    whole = StreamingFit.from_model(model).update(x, y).statistics
    merged = first + second
    for name in ("gram", "rhs", "quadratic", "log_noise", "num_data"):
        torch.testing.assert_close(getattr(merged, name), getattr(whole, name), rtol=1e-12, atol=1e-12)
    other = StreamingFit.from_model(make_model(x, y, num_features=16, seed=1)).update(x, y).statistics
    with pytest.raises(ValueError, match="different random features"):
        whole + other
    several = StreamingFit.from_model(model).update(x, torch.stack([y, y])).statistics
    with pytest.raises(ValueError, match="rhs of shapes"):
        whole.merge(several)
    with pytest.raises(TypeError, match="SufficientStatistics"):
        whole.merge({"gram": whole.gram})


def test_merging_compares_each_part_of_the_fingerprint_relative_to_its_scale():
    """Statistics of other draws are refused even at an outputscale of 1e-8 (features of size 1e-5, which an absolute
    tolerance would call equal), and so are statistics of another noise or mean."""
    x, y = regression_data(n=40)
    tiny = [make_model(x, y, num_features=16, seed=seed) for seed in (0, 1)]
    for model in tiny:
        model.covar_module.outputscale = 1e-8
    first, second = (StreamingFit.from_model(model).update(x, y).statistics for model in tiny)
    assert first.fingerprint[:16].abs().max() < 1e-4
    with pytest.raises(ValueError, match="different random features or kernel hyperparameters;"):
        first + second
    model = make_model(x, y, num_features=16)
    statistics = StreamingFit.from_model(model).update(x, y).statistics
    model.likelihood.noise = 0.07
    with pytest.raises(ValueError, match="different likelihood noise;"):
        statistics + StreamingFit.from_model(model).update(x, y).statistics
    model.likelihood.noise = 0.05
    model.mean_module.constant.data.fill_(0.1)
    with pytest.raises(ValueError, match="different prior mean;"):
        statistics + StreamingFit.from_model(model).update(x, y).statistics
    model.mean_module.constant.data.fill_(0.3)
    merged = statistics + StreamingFit.from_model(model).update(x, y).statistics  # the same model again
    torch.testing.assert_close(merged.num_data, torch.tensor(80.0, dtype=torch.float64))


def test_statistics_cast_to_float32_predict_to_float32_accuracy():
    x, y = regression_data(n=NUM_TRAIN)
    model = make_model(x, y, num_features=16)
    statistics = StreamingFit.from_model(model).update(x, y).statistics
    single = statistics.to(dtype=torch.float32)
    for name in ("gram", "rhs", "quadratic", "log_noise", "num_data", "fingerprint"):
        assert getattr(single, name).dtype == torch.float32, name
        torch.testing.assert_close(getattr(single, name), getattr(statistics, name).float(), rtol=0, atol=0)
    assert single.input_dim == statistics.input_dim
    test_x = torch.rand(25, 3, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    exact = StreamingPredictor.from_statistics(statistics, model.covar_module, model.mean_module).predict(test_x)
    cast = StreamingPredictor.from_statistics(single, model.covar_module, model.mean_module).predict(test_x)
    # A float32 Cholesky of C = I + G loses about cond(C) * eps32 relative accuracy in C^{-1}.
    condition = torch.linalg.cond(torch.eye(16, dtype=torch.float64) + statistics.gram).item()
    tolerance = condition * torch.finfo(torch.float32).eps
    torch.testing.assert_close(cast.mean, exact.mean, rtol=tolerance, atol=tolerance)
    torch.testing.assert_close(cast.variance, exact.variance, rtol=tolerance, atol=0)
    with pytest.raises(TypeError, match="dtype must be a floating-point torch.dtype"):
        statistics.to(dtype=torch.int64)
