"""Adversarial use of :mod:`gprf.streaming`: chunks of the wrong shape, dtype or finiteness, noise where it does not
belong, models that change between chunks, statistics of different models merged, and the predictor fed with
something else."""

from __future__ import annotations

import math

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from gprf.kernels import RandomFourierKernel
from gprf.streaming import StreamingFit, StreamingPredictor, SufficientStatistics, iterate_chunks
from gprf.testing import ExactGPModel, regression_data

X, Y = regression_data(n=60, d=2)


def _model(seed=0, num_features=32, likelihood=None, outputscale=1.0, dtype=torch.float64):
    likelihood = likelihood or gpytorch.likelihoods.GaussianLikelihood()
    kernel = ScaleKernel(RandomFourierKernel(num_features, num_dims=2, seed=seed))
    model = ExactGPModel(X.to(dtype), Y.to(dtype), likelihood, kernel).to(dtype)
    model.covar_module.outputscale = outputscale
    return model


def _fixed_noise_model():
    return _model(likelihood=gpytorch.likelihoods.FixedNoiseGaussianLikelihood(torch.full((60,), 0.1)))


def _fit(model=None):
    return StreamingFit.from_model(model or _model())


@pytest.mark.parametrize(
    ("update", "error", "match"),
    [
        (lambda fit: fit.update(torch.randn(4, 3), torch.randn(4)), ValueError, "built for inputs with 2 columns"),
        (lambda fit: fit.update(X[:4], Y[:3]), ValueError, r"y must have shape \(\.\.\., n\) with n = 4 points"),
        (lambda fit: fit.update(X[:4], Y[:4].long()), TypeError, "y must be a real floating-point tensor"),
        (lambda fit: fit.update(X[:4], torch.full((4,), math.nan)), ValueError, "y contains NaN or infinite values"),
        (lambda fit: fit.update(X[:4], torch.full((4,), math.inf)), ValueError, "y contains NaN or infinite values"),
        (
            lambda fit: fit.update(torch.full((4, 2), math.nan), Y[:4]),
            ValueError,
            r"NaN or infinite inputs in 4 of 4 rows",
        ),
        (lambda fit: fit.update(X[:4], Y[:4], noise=torch.ones(4)), ValueError, "noise= is only used with Fixed"),
        (lambda fit: fit.fit([(X[:4],)]), TypeError, r"fit expects an iterable of \(x, y\) or \(x, y, noise\)"),
        (lambda fit: fit.fit(5), TypeError, r"got int; call update\(x, y\) for one chunk"),
        (lambda fit: fit.statistics, ValueError, r"No data yet: call update\(x, y\) or fit\(chunks\) first"),
        (lambda fit: fit.predictor(), ValueError, "No data yet"),
    ],
)
def test_bad_chunks_are_refused_naming_the_argument(update, error, match):
    with pytest.raises(error, match=match):
        update(_fit())


@pytest.mark.parametrize(
    ("noise", "error", "match"),
    [
        (None, ValueError, r"needs the noise variances of each chunk: pass noise="),
        (-torch.ones(4), ValueError, "noise must be positive"),
        (torch.ones(3), ValueError, r"noise must have shape \(\.\.\., n\) with n = 4"),
        (torch.full((4,), math.nan), ValueError, "noise contains NaN or infinite values"),
    ],
)
def test_bad_observed_noise_is_refused(noise, error, match):
    with pytest.raises(error, match=match):
        _fit(_fixed_noise_model()).update(X[:4], Y[:4], noise=noise)


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: StreamingFit(RBFKernel(), gpytorch.likelihoods.GaussianLikelihood()), TypeError, "dense kernels"),
        (
            lambda: StreamingFit(RandomFourierKernel(8, num_dims=2), gpytorch.likelihoods.BernoulliLikelihood()),
            TypeError,
            "likelihood must be a GPyTorch Gaussian likelihood",
        ),
        (
            lambda: StreamingFit(RandomFourierKernel(8, num_dims=2), gpytorch.likelihoods.GaussianLikelihood(), 3),
            TypeError,
            "mean_module must be a gpytorch.means.Mean or None",
        ),
        (lambda: StreamingFit.from_model(torch.nn.Linear(2, 1)), TypeError, "from_model needs a model with a"),
    ],
)
def test_what_has_no_sufficient_statistics_is_refused(build, error, match):
    with pytest.raises(error, match=match):
        build()


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"x": X, "y": Y, "chunk_size": 0}, ValueError, "chunk_size must be a positive integer, got 0"),
        ({"x": X, "y": Y[:3], "chunk_size": 10}, ValueError, r"y must have shape \(\.\.\., n\) with n = 60"),
        ({"x": X, "y": Y, "noise": torch.ones(5), "chunk_size": 10}, ValueError, "noise must have shape"),
        ({"x": X[:, 0], "y": Y, "chunk_size": 10}, ValueError, r"x must be a tensor of shape \(\.\.\., n, d\)"),
    ],
)
def test_iterate_chunks_refuses_arrays_that_do_not_match(arguments, error, match):
    with pytest.raises(error, match=match):
        list(iterate_chunks(**arguments))


def test_chunks_of_any_size_sum_to_the_statistics_of_all_the_data():
    whole = _fit().update(X, Y).statistics
    for chunk_size in (1, 7, 60, 1000):
        chunked = _fit().fit(iterate_chunks(X, Y, chunk_size=chunk_size)).statistics
        torch.testing.assert_close(chunked.log_marginal_likelihood(), whole.log_marginal_likelihood())


def test_an_empty_chunk_adds_nothing():
    fit = _fit().update(X, Y)
    before = fit.statistics.log_marginal_likelihood()
    fit.update(X[:0], Y[:0])
    torch.testing.assert_close(fit.statistics.log_marginal_likelihood(), before, rtol=0, atol=0)


def test_streamed_predictions_equal_the_in_memory_model():
    model = _model()
    mean, variance = _fit(model).update(X, Y).predictor().predict(X[:5])
    model.eval()
    with torch.no_grad():
        prediction = model(X[:5])
    torch.testing.assert_close((mean, variance), (prediction.mean, prediction.variance), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("change", ["resample", "lengthscale"])
def test_a_chunk_after_the_model_changed_is_refused(change):
    model = _model()
    fit = _fit(model).update(X[:30], Y[:30])
    if change == "resample":
        model.covar_module.base_kernel.resample_features(torch.Generator().manual_seed(3))
    else:
        model.covar_module.base_kernel.lengthscale = 0.25
    with pytest.raises(ValueError, match="differ|changed"):
        fit.update(X[30:], Y[30:])


def test_a_predictor_refuses_a_model_changed_after_it_was_built():
    model = _model()
    predictor = _fit(model).update(X, Y).predictor()
    model.covar_module.base_kernel.lengthscale = 0.25
    with pytest.raises(RuntimeError, match="changed after this predictor was built"):
        predictor.predict(X[:3])


@pytest.mark.parametrize(
    ("other", "match"),
    [
        (lambda: _model(num_features=16), r"gram of shapes \(32, 32\) and \(16, 16\)"),
        (lambda: _model(seed=1), "different random features or kernel hyperparameters"),
        (lambda: _model(outputscale=2.0), "different random features or kernel hyperparameters"),
    ],
)
def test_statistics_of_different_models_do_not_merge(other, match):
    mine = _fit().update(X[:30], Y[:30]).statistics
    theirs = _fit(other()).update(X[30:], Y[30:]).statistics
    with pytest.raises(ValueError, match=match):
        mine.merge(theirs)


def test_statistics_at_a_tiny_outputscale_of_different_draws_do_not_merge():
    """The fingerprint compares relative to the amplitude: 1e-8 does not hide a different draw."""
    mine = _fit(_model(outputscale=1e-8)).update(X[:30], Y[:30]).statistics
    theirs = _fit(_model(seed=1, outputscale=1e-8)).update(X[30:], Y[30:]).statistics
    with pytest.raises(ValueError, match="different random features"):
        mine.merge(theirs)


def test_statistics_with_another_noise_do_not_merge():
    other = _model()
    other.likelihood.noise = 0.3
    mine = _fit().update(X[:30], Y[:30]).statistics
    with pytest.raises(ValueError, match="noise"):
        mine.merge(_fit(other).update(X[30:], Y[30:]).statistics)


def test_merged_halves_are_the_whole():
    halves = _fit().update(X[:30], Y[:30]).statistics.merge(_fit().update(X[30:], Y[30:]).statistics)
    whole = _fit().update(X, Y).statistics
    torch.testing.assert_close(halves.log_marginal_likelihood(), whole.log_marginal_likelihood())
    assert halves.num_data == 60


@pytest.mark.parametrize(
    ("statistics", "kernel", "error", "match"),
    [
        (5, RandomFourierKernel(32, num_dims=2, seed=0), TypeError, "from_statistics expects SufficientStatistics"),
        ("fit", ScaleKernel(RandomFourierKernel(32, num_dims=2, seed=1)), ValueError, "differ from those"),
        ("fit", RBFKernel(), TypeError, "did not evaluate to a feature root"),
    ],
)
def test_a_predictor_from_statistics_checks_what_it_is_given(statistics, kernel, error, match):
    if statistics == "fit":
        statistics = _fit().update(X, Y).statistics
    with pytest.raises(error, match=match):
        StreamingPredictor.from_statistics(statistics, kernel)


def test_merge_refuses_what_is_not_statistics():
    with pytest.raises(TypeError, match="merge expects SufficientStatistics, got int"):
        _fit().update(X, Y).statistics.merge(5)


def test_predict_refuses_a_chunk_size_of_zero_and_another_width():
    predictor = _fit().update(X, Y).predictor()
    with pytest.raises(ValueError, match="chunk_size must be a positive integer, got 0"):
        predictor.predict(X[:5], chunk_size=0)
    with pytest.raises(ValueError, match="built for inputs with 2 columns"):
        predictor.predict(torch.randn(5, 3, dtype=torch.float64))


def test_statistics_are_a_snapshot():
    fit = _fit().update(X[:30], Y[:30])
    snapshot = fit.statistics
    fit.update(X[30:], Y[30:])
    assert isinstance(snapshot, SufficientStatistics) and snapshot.num_data == 30
