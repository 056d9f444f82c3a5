"""Adversarial GPyTorch algebra of gprf kernels (``ScaleKernel(k1) + ScaleKernel(k2)``, ``ScaleKernel(k1) * k2``):
sums and products keep the feature root where they can, and say so where an exact part makes them dense."""

from __future__ import annotations

import math
import warnings

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

import gprf
from gprf.exceptions import DispatchFallbackWarning, LowRankStructureWarning
from gprf.kernels import FeatureSumKernel, RandomFourierKernel, is_feature_expression, root_columns
from gprf.linalg import feature_root
from gprf.testing import ExactGPModel, regression_data, z_bound

X, Y = regression_data(n=40, d=2)


def _scaled(seed):
    return ScaleKernel(RandomFourierKernel(16, num_dims=2, seed=seed)).double()


def test_a_gpytorch_sum_is_the_feature_sum_of_its_parts():
    parts = (_scaled(0), _scaled(1))
    gpytorch_sum = parts[0] + parts[1]
    assert is_feature_expression(gpytorch_sum) and root_columns(gpytorch_sum) == 32
    covariance = gpytorch_sum(X)
    assert feature_root(covariance) is not None
    torch.testing.assert_close(covariance.to_dense(), FeatureSumKernel(*parts)(X).to_dense(), rtol=1e-12, atol=1e-12)


def test_predictions_of_either_spelling_of_a_sum_agree():
    means = []
    for build in (lambda a, b: a + b, FeatureSumKernel):
        model = ExactGPModel(X, Y, gpytorch.likelihoods.GaussianLikelihood(), build(_scaled(0), _scaled(1))).double()
        model.eval()
        with torch.no_grad():
            means.append(model(X[:5]).mean)
    torch.testing.assert_close(means[0], means[1], rtol=1e-9, atol=1e-12)


def test_fit_mll_fits_a_gpytorch_sum():
    model = ExactGPModel(X, Y, gpytorch.likelihoods.GaussianLikelihood(), _scaled(0) + _scaled(1)).double()
    mll = gprf.fit_mll(gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model), tune_steps=3)
    assert not mll.training
    with torch.no_grad():
        assert bool(mll.model(X[:3]).mean.isfinite().all())


def test_a_sum_with_an_exact_part_warns_that_it_is_dense():
    with pytest.warns(LowRankStructureWarning, match="Adding a DenseLinearOperator .* gives a dense N x N"):
        (_scaled(0) + ScaleKernel(RBFKernel()).double())(X).to_dense()


def test_a_product_with_an_exact_factor_first_is_no_feature_expression():
    product = RBFKernel().double() * _scaled(0)
    assert not is_feature_expression(product)
    with pytest.raises(TypeError, match="does not evaluate to a feature root"):
        root_columns(product)
    with pytest.warns(LowRankStructureWarning, match="Forming the dense 40 x 40 matrix"):
        product(X).to_dense()


def test_a_gpytorch_product_of_random_factors_warns_about_its_prediction_strategy():
    with pytest.warns(DispatchFallbackWarning, match="ProductKernel of the random-feature kernels"):
        product = _scaled(0) * RandomFourierKernel(16, num_dims=2, seed=1).double()
        assert is_feature_expression(product)
        assert feature_root(product(X)) is not None


def test_a_repeated_factor_gets_its_own_draw():
    r"""``ScaleKernel(k) * k`` pairs k with an independent copy. At points where :math:`k(\Delta) = 1/2` the product
    of independent draws estimates :math:`k^2 = 1/4`; one draw times itself would estimate :math:`k(2\Delta) =
    1/16`. The joint features of the RBF product are random Fourier features of :math:`K = k^2` with :math:`m = F/2`
    frequencies: :math:`\mathrm{Var} = ([1 + K(2\Delta)]/2 - K^2)/m`, :math:`K(2\Delta) = K^4`."""
    num_features = 4096
    kernel = RandomFourierKernel(num_features, num_dims=2, seed=0).double()
    lengthscale = float(kernel.lengthscale)
    x1 = torch.zeros(1, 2, dtype=torch.float64)
    x2 = torch.tensor([[lengthscale * math.sqrt(2 * math.log(2)), 0.0]], dtype=torch.float64)  # k = 1/2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DispatchFallbackWarning)  # the prediction-strategy note, tested above
        scaled = ScaleKernel(kernel).double()
        estimate = (scaled * kernel)(x1, x2).to_dense().item() / float(scaled.outputscale)
    target = 0.25
    variance = ((1 + target**4) / 2 - target**2) / (num_features // 2)
    assert abs(estimate - target) / math.sqrt(variance) < z_bound(1)
