"""gprf.streaming.predictor: StreamingPredictor predicts chunk by chunk exactly as the in-memory gprf model does
(batched models, trained hyperparameters, chunked test sets), and refuses another kernel or mean, or one changed after
it was built."""

from __future__ import annotations

import pytest
import torch
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood

from gprf.streaming import Prediction, StreamingFit, StreamingPredictor, iterate_chunks
from gprf.testing import regression_data, train_by_mll
from tests.helpers.regression import make_model, optimizer_step
from tests.streaming.conftest import NUM_TRAIN, TOLERANCE, assert_streamed_matches_in_memory, in_memory_prediction

pytestmark = pytest.mark.usefixtures("single_thread")


def test_identical_to_in_memory_model(device, dtype):
    x, y = regression_data(n=NUM_TRAIN, dtype=dtype)
    model = make_model(x, y, num_features=64).to(device)
    x, y = x.to(device), y.to(device)
    test_x = torch.rand(50, 3, generator=torch.Generator().manual_seed(1), dtype=dtype).to(device)
    assert_streamed_matches_in_memory(model, x, y, test_x, **TOLERANCE[dtype])


def test_hyperparameters_trained_in_memory_then_streamed():
    """The intended workflow: fit hyperparameters by the marginal likelihood on a subsample, then stream."""
    x, y = regression_data(n=NUM_TRAIN)
    model = make_model(x[:60], y[:60], num_features=32)
    losses = train_by_mll(model, x[:60], y[:60], steps=15)
    assert losses[-1] < losses[0]
    model.set_train_data(x, y, strict=False)
    test_x = torch.rand(30, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert_streamed_matches_in_memory(model, x, y, test_x)


def test_batched_model():
    x, y = regression_data(n=NUM_TRAIN, batch_shape=(2,))
    model = make_model(x, y, num_features=32, batch_shape=torch.Size([2]))
    model.likelihood.noise = torch.tensor([[0.02], [0.1]], dtype=torch.float64)
    test_x = torch.rand(2, 25, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    fit = StreamingFit.from_model(model).fit(iterate_chunks(x, y, chunk_size=64))
    assert fit.statistics.gram.shape == (2, 32, 32)
    mean, variance = fit.predictor().predict(test_x)
    expected_mean, expected_variance = in_memory_prediction(model, test_x)
    torch.testing.assert_close(mean, expected_mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(variance, expected_variance, rtol=0, atol=1e-8)


def test_predict_chunks_and_without_mean_module():
    x, y = regression_data(n=NUM_TRAIN)
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


def test_statistics_of_another_kernel_or_mean_are_refused():
    x, y = regression_data(n=40)
    model = make_model(x, y, num_features=16, seed=0)
    other = make_model(x, y, num_features=16, seed=1)
    statistics = StreamingFit.from_model(model).update(x, y).statistics
    with pytest.raises(ValueError, match="random features or kernel hyperparameters differ"):
        StreamingPredictor.from_statistics(statistics, other.covar_module, other.mean_module)
    # Streamed with a constant mean of 0.3: a predictor without it would be off by 0.3 everywhere.
    with pytest.raises(ValueError, match="^The prior mean differ.*the same mean_module"):
        StreamingPredictor.from_statistics(statistics, model.covar_module)
    model.covar_module.base_kernel.lengthscale = 0.9
    with pytest.raises(ValueError, match="hyperparameters differ"):
        StreamingPredictor.from_statistics(statistics, model.covar_module, model.mean_module)


CHANGES = {
    "resample_features": lambda model: model.covar_module.base_kernel.resample_features(
        torch.Generator().manual_seed(3)
    ),
    "lengthscale setter": lambda model: setattr(model.covar_module.base_kernel, "lengthscale", 0.9),
    "optimizer step on the mean": lambda model: optimizer_step(model.mean_module.constant),
}


@pytest.mark.parametrize("change", CHANGES)
def test_a_predictor_refuses_a_kernel_or_mean_changed_after_it_was_built(change):
    x, y = regression_data(n=40)
    model = make_model(x, y, num_features=16)
    predictor = StreamingFit.from_model(model).update(x, y).predictor()
    expected = predictor.predict(x[:5])
    model.load_state_dict(model.state_dict())  # a write of the same values: still the model of the statistics
    torch.testing.assert_close(predictor.predict(x[:5]), expected, rtol=0, atol=0)
    CHANGES[change](model)
    with pytest.raises(RuntimeError, match="changed after this predictor was built.*redrawn"):
        predictor.predict(x[:5])


def test_bad_prediction_inputs():
    x, y = regression_data(n=40)
    predictor = StreamingFit.from_model(make_model(x, y, num_features=16)).update(x, y).predictor()
    with pytest.raises(TypeError, match="torch.Tensor"):
        predictor.predict(x.tolist())
    with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
        predictor.predict(x, chunk_size=0)


def test_prediction_is_named_and_observation_noise_adds_the_fitted_noise():
    x, y = regression_data(n=NUM_TRAIN)
    model = make_model(x, y, num_features=32)
    predictor = StreamingFit.from_model(model).fit(iterate_chunks(x, y, chunk_size=64)).predictor()
    test_x = torch.rand(30, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    latent = predictor.predict(test_x)
    observed = predictor.predict(test_x, chunk_size=7, observation_noise=True)
    assert isinstance(observed, Prediction) and observed.mean is observed[0] and observed.variance is observed[1]
    torch.testing.assert_close(observed.mean, latent.mean, rtol=0, atol=1e-12)
    fitted_noise = model.likelihood.noise.detach()
    torch.testing.assert_close(observed.variance - latent.variance, fitted_noise.expand(30), rtol=0, atol=1e-12)
    model.eval()
    with torch.no_grad():  # GPyTorch's predictive distribution of new observations
        expected = model.likelihood(model(test_x)).variance
    torch.testing.assert_close(observed.variance, expected, rtol=0, atol=1e-8)
    parts = list(predictor.predict_chunks(test_x.split(7), observation_noise=True))
    torch.testing.assert_close(torch.cat([part.variance for part in parts]), observed.variance, rtol=0, atol=1e-12)


def test_observation_noise_without_a_likelihood_or_with_fixed_noise_takes_noise():
    x, y = regression_data(n=NUM_TRAIN)
    model = make_model(x, y, num_features=32)
    fit = StreamingFit.from_model(model).update(x, y)
    bare = StreamingPredictor.from_statistics(fit.statistics, model.covar_module, model.mean_module)
    test_x, test_noise = x[:20], torch.linspace(0.01, 0.2, 20, dtype=torch.float64)
    with pytest.raises(ValueError, match="no likelihood needs the test points' noise variances: pass noise="):
        bare.predict(test_x, observation_noise=True)
    latent = bare.predict(test_x)
    observed = bare.predict(test_x, observation_noise=True, noise=test_noise)
    torch.testing.assert_close(observed.variance - latent.variance, test_noise, rtol=0, atol=1e-12)
    pairs = zip(test_x.split(6), test_noise.split(6), strict=True)
    parts = list(bare.predict_chunks(pairs, observation_noise=True))
    torch.testing.assert_close(torch.cat([part.variance for part in parts]), observed.variance, rtol=0, atol=1e-12)
    # The held likelihood's noise plus the given per-point noise.
    both = fit.predictor().predict(test_x, observation_noise=True, noise=test_noise)
    expected = latent.variance + model.likelihood.noise.detach() + test_noise
    torch.testing.assert_close(both.variance, expected, rtol=0, atol=1e-12)

    fixed_noise = torch.full((NUM_TRAIN,), 0.05, dtype=torch.float64)
    fixed = make_model(x, y, FixedNoiseGaussianLikelihood(fixed_noise), num_features=32)
    fixed_predictor = StreamingFit.from_model(fixed).update(x, y, noise=fixed_noise).predictor()
    with pytest.raises(ValueError, match="a FixedNoiseGaussianLikelihood needs the test points' noise variances"):
        fixed_predictor.predict(test_x, observation_noise=True)
    fixed_latent = fixed_predictor.predict(test_x)
    fixed_observed = fixed_predictor.predict(test_x, observation_noise=True, noise=test_noise)
    torch.testing.assert_close(fixed_observed.variance - fixed_latent.variance, test_noise, rtol=0, atol=1e-12)


def test_bad_observation_noise_arguments():
    x, y = regression_data(n=40)
    model = make_model(x, y, num_features=16)
    fit = StreamingFit.from_model(model).update(x, y)
    predictor = fit.predictor()
    with pytest.raises(ValueError, match="only added with observation_noise=True"):
        predictor.predict(x, noise=torch.ones(40, dtype=torch.float64))
    with pytest.raises(TypeError, match="observation_noise must be True or False"):
        predictor.predict(x, observation_noise="yes")
    with pytest.raises(ValueError, match=r"noise of shape \(3,\) does not broadcast .* \(40,\)"):
        predictor.predict(x, observation_noise=True, noise=torch.ones(3, dtype=torch.float64))
    with pytest.raises(TypeError, match="noise must be a torch.Tensor"):
        predictor.predict(x, observation_noise=True, noise=[0.1] * 40)
    model.likelihood.noise = 0.3
    with pytest.raises(ValueError, match="likelihood noise differ"):
        StreamingPredictor.from_statistics(fit.statistics, model.covar_module, model.mean_module, model.likelihood)
