"""gprf.streaming.features: the feature root of a model's covariance module (active_dims and feature sums included)
and the fingerprint that identifies its random features and hyperparameters."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel

from gprf.kernels import FeatureSumKernel, RandomFourierKernel
from gprf.linalg import feature_root
from gprf.streaming import model_root
from gprf.streaming.features import feature_fingerprint
from tests.prediction.conftest import ExactModel, make_data, make_model
from tests.streaming.conftest import NUM_TRAIN, assert_streamed_matches_in_memory


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
        assert_streamed_matches_in_memory(model, x, y, test_x)


def test_model_root_is_the_decoded_root_or_a_clear_error():
    x, y = make_data(n=20)
    model = make_model(x, y, num_features=16)
    root = model_root(model.covar_module, x)
    expected = feature_root(model.covar_module(x))
    torch.testing.assert_close(root.scaled_features(), expected.scaled_features(), rtol=0, atol=0)
    with pytest.raises(TypeError, match="did not evaluate to a feature root"):
        model_root(ScaleKernel(gpytorch.kernels.RBFKernel()).double(), x)


def test_fingerprint_identifies_draws_and_hyperparameters():
    x, y = make_data(n=20)
    model, same, other = (make_model(x, y, num_features=16, seed=seed) for seed in (0, 0, 1))
    fingerprint = feature_fingerprint(model.covar_module, 3, torch.float64, torch.device("cpu"))
    assert fingerprint.shape == (16,) and fingerprint.dtype == torch.float64
    # The scaled root at the probe input (0.1, 0.5, 0.9).
    probe = torch.tensor([[0.1, 0.5, 0.9]], dtype=torch.float64)
    torch.testing.assert_close(fingerprint, model_root(model.covar_module, probe).scaled_features()[0].detach())
    torch.testing.assert_close(
        feature_fingerprint(same.covar_module, 3, torch.float64, torch.device("cpu")), fingerprint
    )
    assert not torch.allclose(
        feature_fingerprint(other.covar_module, 3, torch.float64, torch.device("cpu")), fingerprint
    )
    model.covar_module.base_kernel.lengthscale = 0.9
    assert not torch.allclose(
        feature_fingerprint(model.covar_module, 3, torch.float64, torch.device("cpu")), fingerprint
    )
