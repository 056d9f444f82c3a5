"""gprf.streaming.features: streaming reads a model's covariance module as the model does (active_dims and feature
sums included), and the fingerprint identifies its random features and hyperparameters."""

from __future__ import annotations

import gpytorch
import torch
from gpytorch.kernels import ScaleKernel

from gprf.kernels import FeatureSumKernel, RandomFourierKernel
from gprf.linalg import covariance_root
from gprf.streaming.features import likelihood_noise, model_fingerprint
from gprf.streaming.statistics import fingerprint_mismatch
from gprf.testing import ExactGPModel, regression_data
from tests.helpers.regression import make_model
from tests.streaming.conftest import NUM_TRAIN, assert_streamed_matches_in_memory


def test_active_dims_and_feature_sums():
    x, y = regression_data(n=NUM_TRAIN)
    slice_only = ScaleKernel(RandomFourierKernel(24, num_dims=2, active_dims=[0, 2], seed=1))
    summed = FeatureSumKernel(
        ScaleKernel(RandomFourierKernel(24, num_dims=2, seed=1)),
        ScaleKernel(RandomFourierKernel(16, num_dims=2, kernel="matern52", seed=2)),
        active_dims=[1, 2],
    )
    test_x = torch.rand(20, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    for kernel in (slice_only, summed):
        model = ExactGPModel(x, y, gpytorch.likelihoods.GaussianLikelihood(), kernel).double()
        assert_streamed_matches_in_memory(model, x, y, test_x)


def _fingerprint(model) -> torch.Tensor:
    return model_fingerprint(
        model.covar_module, 3, torch.float64, torch.device("cpu"), model.mean_module, model.likelihood
    )


def test_fingerprint_identifies_draws_hyperparameters_noise_and_mean():
    x, y = regression_data(n=20)
    model, same, other = (make_model(x, y, num_features=16, seed=seed) for seed in (0, 0, 1))
    fingerprint = _fingerprint(model)
    assert fingerprint.shape == (18,) and fingerprint.dtype == torch.float64
    # The scaled root at the probe input (0.1, 0.5, 0.9), then the noise variance 0.05 and the constant mean 0.3.
    probe = torch.tensor([[0.1, 0.5, 0.9]], dtype=torch.float64)
    root = covariance_root(model.covar_module, probe).scaled_features()
    torch.testing.assert_close(fingerprint[:16], root[0].detach())
    torch.testing.assert_close(fingerprint[16:], torch.tensor([0.05, 0.3], dtype=torch.float64))
    torch.testing.assert_close(_fingerprint(same), fingerprint, rtol=0, atol=0)
    assert fingerprint_mismatch(_fingerprint(same), fingerprint, 16) is None
    assert fingerprint_mismatch(_fingerprint(other), fingerprint, 16) == "random features or kernel hyperparameters"
    model.covar_module.base_kernel.lengthscale = 0.9
    assert fingerprint_mismatch(_fingerprint(model), fingerprint, 16) == "random features or kernel hyperparameters"
    same.likelihood.noise = 0.06
    same.mean_module.constant.data.fill_(0.2)
    assert fingerprint_mismatch(_fingerprint(same), fingerprint, 16) == "likelihood noise and prior mean"
    # Without a mean module or likelihood, those parts are zero.
    bare = model_fingerprint(model.covar_module, 3, torch.float64, torch.device("cpu"))
    assert bare[16:].tolist() == [0.0, 0.0]


def test_likelihood_noise_is_what_the_likelihood_itself_adds():
    x = torch.rand(4, 3, dtype=torch.float64)
    homoscedastic = gpytorch.likelihoods.GaussianLikelihood().double()
    homoscedastic.noise = 0.2
    torch.testing.assert_close(likelihood_noise(homoscedastic, x, torch.Size([4])), torch.full((4,), 0.2).double())
    fixed = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(torch.full((4,), 0.1, dtype=torch.float64))
    assert likelihood_noise(fixed, x, torch.Size([4])) is None  # the fixed noise comes with the data
    learned = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(
        torch.full((4,), 0.1, dtype=torch.float64), learn_additional_noise=True
    ).double()
    learned.second_noise = 0.3
    torch.testing.assert_close(likelihood_noise(learned, x, torch.Size([4])), torch.full((4,), 0.3).double())
