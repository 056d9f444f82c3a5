"""Streaming sufficient statistics and chunked prediction: equal to the in-memory gprf model."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from torch.utils.data import DataLoader, TensorDataset

from gprf.kernels import FeatureSumKernel, RandomFourierKernel
from gprf.streaming import StreamingFit, StreamingPredictor, SufficientStatistics, iterate_chunks, model_root
from tests.prediction.conftest import ExactModel, make_data, make_model, train_by_mll

pytestmark = pytest.mark.usefixtures("single_thread")

NUM_TRAIN = 200
# Both paths compute the same float64 sums, in a different order: agreement to rounding, far below 1e-8.
TOLERANCE = {torch.float64: dict(rtol=0, atol=1e-8), torch.float32: dict(rtol=1e-5, atol=1e-5)}


def in_memory_prediction(model: ExactModel, test_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    model.eval()
    with torch.no_grad():
        posterior = model(test_x)
        return posterior.mean, posterior.variance


def streamed_prediction(model, x, y, test_x, chunk_size=37, noise=None):
    fit = StreamingFit.from_model(model).fit(iterate_chunks(x, y, noise, chunk_size=chunk_size))
    return fit.predictor().predict(test_x, chunk_size=11)


def test_identical_to_in_memory_model(device, dtype):
    x, y = make_data(n=NUM_TRAIN, dtype=dtype)
    model = make_model(x, y, num_features=64).to(device)
    x, y = x.to(device), y.to(device)
    test_x = torch.rand(50, 3, generator=torch.Generator().manual_seed(1), dtype=dtype).to(device)
    mean, variance = streamed_prediction(model, x, y, test_x)
    expected_mean, expected_variance = in_memory_prediction(model, test_x)
    assert mean.dtype == variance.dtype == dtype and mean.device == x.device
    torch.testing.assert_close(mean, expected_mean, **TOLERANCE[dtype])
    torch.testing.assert_close(variance, expected_variance, **TOLERANCE[dtype])


def test_statistics_are_float64_sums_independent_of_chunking(dtype):
    x, y = make_data(n=NUM_TRAIN, dtype=dtype)
    model = make_model(x, y, num_features=32)
    whole = StreamingFit.from_model(model).update(x, y).statistics
    assert all(t.dtype == torch.float64 for t in (whole.gram, whole.rhs, whole.quadratic, whole.log_noise))
    assert whole.gram.shape == (32, 32) and whole.rhs.shape == (32,) and float(whole.num_data) == NUM_TRAIN
    loader = DataLoader(TensorDataset(x, y), batch_size=23)
    chunked = StreamingFit.from_model(model).fit(loader).statistics
    halves = [StreamingFit.from_model(model).update(x[part], y[part]).statistics for part in (slice(0, 90), slice(90, None))]
    for other in (chunked, halves[0] + halves[1]):
        for name in ("gram", "rhs", "quadratic", "log_noise", "num_data"):
            torch.testing.assert_close(getattr(other, name), getattr(whole, name), rtol=1e-12, atol=1e-10)
    # The definitions, densely: G = R^T R / s2, b = R^T (y - mu) / s2.
    root = model_root(model.covar_module, x).scaled_features().double()
    residual = (y - model.mean_module(x)).double().detach()
    noise = model.likelihood.noise.detach().double()
    torch.testing.assert_close(whole.gram, root.mT @ root / noise, rtol=1e-12, atol=1e-10)
    torch.testing.assert_close(whole.rhs, root.mT @ residual / noise, rtol=1e-12, atol=1e-10)


def test_log_marginal_likelihood_matches_dense_gaussian(float64):
    x, y = make_data(n=NUM_TRAIN)
    model = make_model(x, y, num_features=32)
    statistics = StreamingFit.from_model(model).fit(iterate_chunks(x, y, chunk_size=64)).statistics
    with torch.no_grad():
        root = model_root(model.covar_module, x).scaled_features()
        covariance = root @ root.mT + model.likelihood.noise * torch.eye(NUM_TRAIN)
        expected = torch.distributions.MultivariateNormal(model.mean_module(x), covariance).log_prob(y)
    torch.testing.assert_close(statistics.log_marginal_likelihood(), expected, rtol=1e-10, atol=1e-8)


def test_hyperparameters_trained_in_memory_then_streamed():
    """The intended workflow: fit hyperparameters by the marginal likelihood on a subsample, then stream."""
    x, y = make_data(n=NUM_TRAIN)
    model = make_model(x[:60], y[:60], num_features=32)
    losses = train_by_mll(model, x[:60], y[:60], steps=15)
    assert losses[-1] < losses[0]
    model.set_train_data(x, y, strict=False)
    test_x = torch.rand(30, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    mean, variance = streamed_prediction(model, x, y, test_x)
    expected_mean, expected_variance = in_memory_prediction(model, test_x)
    torch.testing.assert_close(mean, expected_mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(variance, expected_variance, rtol=0, atol=1e-8)


def test_batched_model():
    x, y = make_data(n=NUM_TRAIN, batch_shape=(2,))
    model = make_model(x, y, num_features=32, batch_shape=torch.Size([2]))
    model.likelihood.noise = torch.tensor([[0.02], [0.1]], dtype=torch.float64)
    test_x = torch.rand(2, 25, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    fit = StreamingFit.from_model(model).fit(iterate_chunks(x, y, chunk_size=64))
    assert fit.statistics.gram.shape == (2, 32, 32)
    mean, variance = fit.predictor().predict(test_x)
    expected_mean, expected_variance = in_memory_prediction(model, test_x)
    torch.testing.assert_close(mean, expected_mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(variance, expected_variance, rtol=0, atol=1e-8)


def test_several_targets_share_one_gram_matrix():
    x, y = make_data(n=NUM_TRAIN)
    targets = torch.stack([y, 2 * y - 1, torch.cos(3 * x[:, 0])])
    model = make_model(x, y, num_features=32)
    test_x = torch.rand(20, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    fit = StreamingFit.from_model(model).fit(iterate_chunks(x, targets, chunk_size=50))
    assert fit.statistics.gram.shape == (32, 32) and fit.statistics.rhs.shape == (3, 32)
    mean, variance = fit.predictor().predict(test_x)
    assert mean.shape == variance.shape == (3, 20)
    for k in range(3):
        model.set_train_data(x, targets[k], strict=False)
        expected_mean, expected_variance = in_memory_prediction(model, test_x)
        torch.testing.assert_close(mean[k], expected_mean, rtol=0, atol=1e-8)
        torch.testing.assert_close(variance[k], expected_variance, rtol=0, atol=1e-8)


@pytest.mark.parametrize("learn_additional_noise", [False, True])
def test_fixed_noise_given_per_chunk(learn_additional_noise):
    x, y = make_data(n=NUM_TRAIN)
    noise = 0.01 + 0.2 * torch.rand(NUM_TRAIN, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    likelihood = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise=noise, learn_additional_noise=learn_additional_noise)
    model = make_model(x, y, likelihood=likelihood, num_features=32)
    if learn_additional_noise:
        likelihood.second_noise = 0.03
    test_x = torch.rand(20, 3, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    mean, variance = streamed_prediction(model, x, y, test_x, noise=noise)
    expected_mean, expected_variance = in_memory_prediction(model, test_x)
    torch.testing.assert_close(mean, expected_mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(variance, expected_variance, rtol=0, atol=1e-8)


def test_active_dims_and_feature_sums():
    x, y = make_data(n=NUM_TRAIN)
    slice_only = ScaleKernel(RandomFourierKernel(24, num_dims=2, active_dims=[0, 2], seed=1))
    summed = FeatureSumKernel(
        ScaleKernel(RandomFourierKernel(24, num_dims=2, seed=1)),
        ScaleKernel(RandomFourierKernel(16, num_dims=2, kernel="matern52", seed=2)),
        active_dims=[1, 2],
    )
    test_x = torch.rand(20, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    for kernel in (slice_only, summed):
        model = ExactModel(x, y, gpytorch.likelihoods.GaussianLikelihood(), kernel).double()
        mean, variance = streamed_prediction(model, x, y, test_x)
        expected_mean, expected_variance = in_memory_prediction(model, test_x)
        torch.testing.assert_close(mean, expected_mean, rtol=0, atol=1e-8)
        torch.testing.assert_close(variance, expected_variance, rtol=0, atol=1e-8)


def test_predict_chunks_and_without_mean_module():
    x, y = make_data(n=NUM_TRAIN)
    model = make_model(x, y, num_features=32)
    fit = StreamingFit(model.covar_module, model.likelihood).fit(iterate_chunks(x, y, chunk_size=70))
    test_x = torch.rand(30, 3, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    whole = fit.predictor().predict(test_x)
    parts = list(fit.predictor().predict_chunks(test_x.split(7)))
    torch.testing.assert_close(torch.cat([m for m, _ in parts]), whole[0], rtol=0, atol=1e-12)
    torch.testing.assert_close(torch.cat([v for _, v in parts]), whole[1], rtol=0, atol=1e-12)
    # Without a mean module the model's constant mean (0.3) is not subtracted: a zero-mean GP.
    model.mean_module.constant.data.zero_()
    torch.testing.assert_close(whole[0], in_memory_prediction(model, test_x)[0], rtol=0, atol=1e-8)


def test_statistics_move_between_devices(device):
    x, y = make_data(n=50)
    model = make_model(x, y, num_features=16)
    statistics = StreamingFit.from_model(model).update(x, y).statistics
    moved = statistics.to(device)
    assert isinstance(moved, SufficientStatistics) and moved.gram.device.type == device.type
    assert moved.gram.dtype == torch.float64 and moved.input_dim == 3
    torch.testing.assert_close(moved.to("cpu").gram, statistics.gram, rtol=0, atol=0)


def test_bad_inputs_get_clear_errors():
    x, y = make_data(n=40)
    model = make_model(x, y, num_features=16)
    with pytest.raises(TypeError, match="random-feature kernel"):
        StreamingFit(ScaleKernel(gpytorch.kernels.RBFKernel()), model.likelihood)
    with pytest.raises(TypeError, match="Gaussian likelihood"):
        StreamingFit(model.covar_module, gpytorch.likelihoods.BernoulliLikelihood())
    with pytest.raises(TypeError, match="covar_module attribute"):
        StreamingFit.from_model(torch.nn.Linear(2, 2))
    fit = StreamingFit.from_model(model)
    with pytest.raises(ValueError, match="No data yet"):
        fit.statistics
    with pytest.raises(ValueError, match=r"shape \(\.\.\., n\)"):
        fit.update(x, y[:-1])
    with pytest.raises(ValueError, match="NaN"):
        fit.update(x, torch.where(y > 0, y, torch.nan))
    with pytest.raises(ValueError, match="only used with FixedNoiseGaussianLikelihood"):
        fit.update(x, y, noise=torch.ones(40, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"\(x, y\)"):
        fit.fit([x])
    with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
        list(iterate_chunks(x, y, chunk_size=0))
    fit.update(x, y)
    with pytest.raises(ValueError, match="columns"):
        fit.update(x[:, :2], y)
    fixed = make_model(x, y, likelihood=gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise=torch.ones(40)), num_features=16)
    with pytest.raises(ValueError, match="pass noise="):
        StreamingFit.from_model(fixed).update(x, y)
    with pytest.raises(ValueError, match="positive"):
        StreamingFit.from_model(fixed).update(x, y, noise=-torch.ones(40, dtype=torch.float64))


def test_statistics_of_other_features_are_refused():
    x, y = make_data(n=40)
    model = make_model(x, y, num_features=16, seed=0)
    other = make_model(x, y, num_features=16, seed=1)
    statistics = StreamingFit.from_model(model).update(x, y).statistics
    with pytest.raises(ValueError, match="different random features"):
        statistics + StreamingFit.from_model(other).update(x, y).statistics
    with pytest.raises(ValueError, match="hyperparameters differ"):
        StreamingPredictor.from_statistics(statistics, other.covar_module)
    model.covar_module.base_kernel.lengthscale = 0.9
    with pytest.raises(ValueError, match="hyperparameters differ"):
        StreamingPredictor.from_statistics(statistics, model.covar_module)
    model.covar_module.base_kernel.lengthscale = torch.tensor([0.4, 0.7, 1.1], dtype=torch.float64)
    predictor = StreamingPredictor.from_statistics(statistics, model.covar_module, model.mean_module)
    model.covar_module.base_kernel.resample_features(torch.Generator().manual_seed(3))
    with pytest.raises(RuntimeError, match="redrawn"):
        predictor.predict(x)
