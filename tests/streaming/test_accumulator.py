"""gprf.streaming.accumulator: StreamingFit accumulates the float64 sufficient statistics chunk by chunk (equal to the
dense definitions whatever the chunking), several targets, fixed noise per chunk, iterate_chunks, and clear errors (a
model changed between chunks included)."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from torch.utils.data import DataLoader, TensorDataset

from gprf.linalg import covariance_root
from gprf.streaming import StreamingFit, iterate_chunks
from gprf.testing import regression_data
from tests.helpers.regression import make_model, optimizer_step
from tests.streaming.conftest import NUM_TRAIN, assert_streamed_matches_in_memory, in_memory_prediction

pytestmark = pytest.mark.usefixtures("single_thread")


def test_statistics_are_float64_sums_independent_of_chunking(dtype):
    x, y = regression_data(n=NUM_TRAIN, dtype=dtype)
    model = make_model(x, y, num_features=32)
    whole = StreamingFit.from_model(model).update(x, y).statistics
    assert all(t.dtype == torch.float64 for t in (whole.gram, whole.rhs, whole.quadratic, whole.log_noise))
    assert whole.gram.shape == (32, 32) and whole.rhs.shape == (32,) and float(whole.num_data) == NUM_TRAIN
    loader = DataLoader(TensorDataset(x, y), batch_size=23)
    chunked = StreamingFit.from_model(model).fit(loader).statistics
    halves = [
        StreamingFit.from_model(model).update(x[part], y[part]).statistics for part in (slice(0, 90), slice(90, None))
    ]
    for other in (chunked, halves[0] + halves[1]):
        for name in ("gram", "rhs", "quadratic", "log_noise", "num_data"):
            torch.testing.assert_close(getattr(other, name), getattr(whole, name), rtol=1e-12, atol=1e-10)
    # The definitions, densely: G = R^T R / s2, b = R^T (y - mu) / s2.
    root = covariance_root(model.covar_module, x).scaled_features().double()
    residual = (y - model.mean_module(x)).double().detach()
    noise = model.likelihood.noise.detach().double()
    torch.testing.assert_close(whole.gram, root.mT @ root / noise, rtol=1e-12, atol=1e-10)
    torch.testing.assert_close(whole.rhs, root.mT @ residual / noise, rtol=1e-12, atol=1e-10)


def test_several_targets_share_one_gram_matrix():
    x, y = regression_data(n=NUM_TRAIN)
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
    x, y = regression_data(n=NUM_TRAIN)
    noise = 0.01 + 0.2 * torch.rand(NUM_TRAIN, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    likelihood = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(
        noise=noise, learn_additional_noise=learn_additional_noise
    )
    model = make_model(x, y, likelihood=likelihood, num_features=32)
    if learn_additional_noise:
        likelihood.second_noise = 0.03
    test_x = torch.rand(20, 3, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    assert_streamed_matches_in_memory(model, x, y, test_x, noise=noise)


def test_bad_inputs_get_clear_errors():
    x, y = regression_data(n=40)
    model = make_model(x, y, num_features=16)
    with pytest.raises(TypeError, match="random-feature kernel"):
        StreamingFit(ScaleKernel(gpytorch.kernels.RBFKernel()), model.likelihood)
    with pytest.raises(TypeError, match="Gaussian likelihood"):
        StreamingFit(model.covar_module, gpytorch.likelihoods.BernoulliLikelihood())
    with pytest.raises(TypeError, match="covar_module attribute"):
        StreamingFit.from_model(torch.nn.Linear(2, 2))
    fit = StreamingFit.from_model(model)
    with pytest.raises(ValueError, match="No data yet"):
        _ = fit.statistics
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
    fixed = make_model(
        x, y, likelihood=gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise=torch.ones(40)), num_features=16
    )
    with pytest.raises(ValueError, match="pass noise="):
        StreamingFit.from_model(fixed).update(x, y)
    with pytest.raises(ValueError, match="positive"):
        StreamingFit.from_model(fixed).update(x, y, noise=-torch.ones(40, dtype=torch.float64))


CHANGES = {
    "resample_features": lambda model: model.covar_module.base_kernel.resample_features(
        torch.Generator().manual_seed(3)
    ),
    "lengthscale setter": lambda model: setattr(model.covar_module.base_kernel, "lengthscale", 0.9),
    "optimizer step on the noise": lambda model: optimizer_step(model.likelihood.raw_noise),
    "optimizer step on the mean": lambda model: optimizer_step(model.mean_module.constant),
}


@pytest.mark.parametrize("change", CHANGES)
def test_chunks_after_a_change_of_the_model_are_refused(change):
    x, y = regression_data(n=40)
    model = make_model(x, y, num_features=16)
    fit = StreamingFit.from_model(model).update(x[:20], y[:20])
    model.load_state_dict(model.state_dict())  # a write of the same values: still one model
    fit.update(x[20:30], y[20:30])
    CHANGES[change](model)
    with pytest.raises(ValueError, match="changed after the first chunk.*start a new StreamingFit"):
        fit.update(x[30:], y[30:])
    assert fit.statistics.num_data == 30  # the refused chunk was not added


def test_iterate_chunks_splits_every_tensor_alike():
    x = torch.arange(10.0).view(5, 2)
    y = torch.arange(5.0)
    chunks = list(iterate_chunks(x, y, chunk_size=2))
    assert [len(chunk) for chunk in chunks] == [2, 2, 2]
    torch.testing.assert_close(torch.cat([chunk[0] for chunk in chunks]), x, rtol=0, atol=0)
    torch.testing.assert_close(torch.cat([chunk[1] for chunk in chunks]), y, rtol=0, atol=0)
    noise = torch.full((5,), 0.1)
    assert [len(chunk) for chunk in iterate_chunks(x, y, noise, chunk_size=4)] == [3, 3]
