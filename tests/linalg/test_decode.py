"""feature_root: the one decoder reads every covariance GPyTorch builds from a gprf kernel back as a FeatureRoot."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from gprf.exceptions import LowRankStructureWarning
from gprf.kernels import RandomFourierKernel
from gprf.linalg import FeatureRootAddedDiagLinearOperator, FeatureRootLinearOperator, covariance_root, feature_root
from gprf.testing import regression_data
from tests.helpers.regression import make_model


def test_lazy_scaled_and_noisy_covariances_decode_to_the_same_root():
    x, y = regression_data(n=20)
    model = make_model(x, y)
    base = model.covar_module.base_kernel
    lazy = model.covar_module(x)
    assert not isinstance(lazy, FeatureRootLinearOperator)  # GPyTorch's lazily evaluated kernel tensor
    root = feature_root(lazy)
    torch.testing.assert_close(root.features, base.features(x), rtol=0, atol=0)  # the amplitude kept apart
    torch.testing.assert_close(root.outputscale, model.covar_module.outputscale.detach(), rtol=0, atol=0)
    assert root.noise is None and root.versions == (base.feature_map.draw_version,)
    noisy = feature_root(model.likelihood(model(x)).lazy_covariance_matrix)
    assert isinstance(
        model.likelihood(model(x)).lazy_covariance_matrix.evaluate_kernel(), FeatureRootAddedDiagLinearOperator
    )
    torch.testing.assert_close(noisy.features, root.features, rtol=0, atol=0)
    torch.testing.assert_close(noisy.noise, model.likelihood.noise.detach().expand(1), rtol=0, atol=0)
    torch.testing.assert_close(noisy.scaled_features() @ noisy.scaled_features().mT, lazy.to_dense())


def test_covariances_without_a_feature_root_decode_to_none():
    x, _ = regression_data(n=10)
    assert feature_root(RBFKernel().double()(x)) is None
    assert feature_root(torch.eye(10, dtype=torch.float64)) is None
    with pytest.warns(LowRankStructureWarning, match="dense"):
        mixed = RandomFourierKernel(16, num_dims=3, seed=0).double() + RBFKernel().double()
    assert feature_root(mixed(x)) is None


def test_covariance_root_evaluates_a_module_and_decodes_it():
    x, y = regression_data(n=20)
    model = make_model(x, y, num_features=16)
    expected = feature_root(model.covar_module(x))
    for module in (model.covar_module, model.forward):  # a kernel, or a module whose value is a distribution
        root = covariance_root(module, x)
        torch.testing.assert_close(root.features, expected.features, rtol=0, atol=0)
        torch.testing.assert_close(root.outputscale, expected.outputscale, rtol=0, atol=0)


def test_covariance_root_of_a_module_without_one_is_a_type_error():
    x, _ = regression_data(n=10)
    with pytest.raises(TypeError, match="ScaleKernel did not evaluate to a feature root"):
        covariance_root(ScaleKernel(RBFKernel()).double(), x)
    with pytest.warns(LowRankStructureWarning, match="dense"):
        mixed = RandomFourierKernel(16, num_dims=3, seed=0).double() + RBFKernel().double()
    with pytest.raises(TypeError, match="not a dense kernel or a sum with one"):
        covariance_root(mixed, x)


def test_versions_follow_the_draws():
    x, _ = regression_data(n=10)
    kernel = ScaleKernel(RandomFourierKernel(16, num_dims=3, seed=0)).double()
    before = feature_root(kernel(x)).versions
    kernel.base_kernel.resample_features(torch.Generator().manual_seed(3))
    assert feature_root(kernel(x)).versions == (before[0] + 1,)


def test_heteroscedastic_noise_is_read_per_row():
    x, y = regression_data(n=15)
    noise = torch.linspace(0.01, 0.2, 15, dtype=torch.float64)
    model = make_model(x, y, likelihood=gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise))
    root = feature_root(model.likelihood(model(x)).lazy_covariance_matrix)
    torch.testing.assert_close(root.noise, noise, rtol=0, atol=0)
