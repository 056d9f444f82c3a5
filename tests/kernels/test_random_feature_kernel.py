"""gprf.kernels.random_feature_kernel: the base of kernels whose real root is a random FeatureMap of
lengthscale-scaled inputs — the real root (doubled columns for complex maps), gradients to the lengthscale, and the
posterior choice between the real-part kernel's and the complex-feature prediction strategy."""

from __future__ import annotations

import gpytorch
import pytest
import torch

from gprf.features import real_root
from gprf.kernels import PolynomialSketchKernel, RandomFourierKernel
from gprf.prediction import ComplexFeaturePredictionStrategy, FeatureSpacePredictionStrategy
from gprf.testing import ExactGPModel, regression_data


def test_features_are_the_real_root_of_scaled_inputs():
    x, _ = regression_data(10)
    kernel = PolynomialSketchKernel(8, num_dims=3, degree=2, sketch="rademacher", complex=True, ard_num_dims=3, seed=0)
    kernel = kernel.double()
    kernel.lengthscale = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    phi = kernel.feature_map(x / kernel.lengthscale)
    assert phi.is_complex() and (kernel.num_features, kernel.root_dim) == (8, 16)
    features = kernel.features(x)
    torch.testing.assert_close(features, real_root(phi), rtol=0, atol=0)
    torch.testing.assert_close(features @ features.mT, (phi @ phi.mH).real)
    # Gradients reach the (ARD) lengthscale through the scaled inputs.
    features.sum().backward()
    assert kernel.raw_lengthscale.grad is not None and bool((kernel.raw_lengthscale.grad != 0).all())


@pytest.mark.parametrize(
    ("complex_map", "posterior", "strategy"),
    [
        (True, "complex", ComplexFeaturePredictionStrategy),
        (True, "real_kernel", FeatureSpacePredictionStrategy),
        (False, "complex", FeatureSpacePredictionStrategy),  # real features: both posteriors coincide
    ],
)
def test_prediction_strategy_follows_the_posterior_choice(complex_map, posterior, strategy):
    x, y = regression_data(20)
    if complex_map:
        kernel = PolynomialSketchKernel(8, num_dims=3, complex=True, posterior=posterior, seed=0)
    else:
        kernel = RandomFourierKernel(8, num_dims=3, posterior=posterior, seed=0)
    model = ExactGPModel(x, y, gpytorch.likelihoods.GaussianLikelihood(), kernel).double().eval()
    model(x[:2])
    assert type(model.prediction_strategy) is strategy


def test_posterior_is_validated():
    with pytest.raises(ValueError, match="'real_kernel', 'complex'"):
        PolynomialSketchKernel(8, num_dims=2, complex=True, posterior="imaginary")
    kernel = PolynomialSketchKernel(8, num_dims=2, complex=True)
    with pytest.raises(ValueError, match="'real_kernel', 'complex'"):
        kernel.posterior = "Complex"
    kernel.posterior = "complex"
    assert kernel.posterior == "complex"
