"""ComplexFeaturePredictionStrategy (posterior="complex"): the real part of the complex-feature GP posterior
(paper 000, App. D) against dense complex formulas, with fantasies, under BoTorch, and its refusal of covariances
without features."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from linear_operator.operators import DenseLinearOperator

from gprf.kernels import PolynomialSketchKernel, RandomFourierKernel
from gprf.prediction import ComplexFeaturePredictionStrategy, FeatureSpacePredictionStrategy
from gprf.testing import ExactGPModel


def _data(n=120, d=4, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=generator, dtype=torch.float64)
    y = (x.sum(-1) - 1.5) ** 3 + 0.05 * torch.randn(n, generator=generator, dtype=torch.float64)
    return x, y


def _model(x, y, likelihood, posterior="complex", num_features=24, sketch="srht"):
    sketch_kernel = PolynomialSketchKernel(
        num_features, num_dims=x.size(-1), degree=3, sketch=sketch, complex=True, bias=0.5, posterior=posterior, seed=0
    )
    kernel = ScaleKernel(sketch_kernel)
    model = ExactGPModel(x, y, likelihood, kernel).double()
    model.covar_module.outputscale = 0.8
    model.covar_module.base_kernel.lengthscale = 1.3
    model.mean_module.constant.data.fill_(0.2)
    return model.eval()


def _dense_complex_posterior(model, x, y, test_x, noise):
    """Eqs. 80-81 with the complex kernel matrix, a complex solve, and real parts (eqs. 86-87)."""
    kernel = model.covar_module
    scale = kernel.outputscale.sqrt()
    feature_map = kernel.base_kernel.feature_map
    phi = feature_map(x / kernel.base_kernel.lengthscale).to(torch.complex128) * scale
    phi_test = feature_map(test_x / kernel.base_kernel.lengthscale).to(torch.complex128) * scale
    k_train = phi @ phi.mH
    k_cross = phi_test @ phi.mH
    k_test = phi_test @ phi_test.mH
    system = k_train + torch.diag(noise.to(torch.complex128))
    mean_const = model.mean_module.constant.detach()
    residual = (y - mean_const).to(torch.complex128)
    mean = (k_cross @ torch.linalg.solve(system, residual)).real + mean_const
    covar = (k_test - k_cross @ torch.linalg.solve(system, k_cross.mH)).real
    return mean, covar


def test_matches_dense_complex_gp_with_heteroscedastic_noise():
    x, y = _data()
    noise = 0.01 + 0.1 * torch.rand(120, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    model = _model(x, y, gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise=noise))
    test_x = torch.rand(40, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    posterior = model(test_x)
    assert type(model.prediction_strategy) is ComplexFeaturePredictionStrategy
    mean, covar = _dense_complex_posterior(model, x, y, test_x, noise)
    torch.testing.assert_close(posterior.mean, mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(posterior.covariance_matrix, covar, rtol=0, atol=1e-8)
    # It is a different posterior from the real-part kernel's (same features, same hyperparameters).
    real_model = _model(x, y, gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise=noise), posterior="real_kernel")
    real_posterior = real_model(test_x)
    assert type(real_model.prediction_strategy) is FeatureSpacePredictionStrategy
    assert (real_posterior.mean - posterior.mean).abs().max() > 1e-4


def test_fantasies_match_dense_complex_gp():
    x, y = _data()
    model = _model(x, y, gpytorch.likelihoods.GaussianLikelihood())
    model.likelihood.noise = 0.02
    test_x = torch.rand(10, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    model(test_x)
    new_x = torch.rand(5, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    new_y = torch.randn(5, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    fantasy = model.get_fantasy_model(new_x, new_y)
    assert type(fantasy.prediction_strategy) is ComplexFeaturePredictionStrategy
    mean, covar = _dense_complex_posterior(
        model, torch.cat([x, new_x]), torch.cat([y, new_y]), test_x, torch.full((125,), 0.02, dtype=torch.float64)
    )
    posterior = fantasy(test_x)
    torch.testing.assert_close(posterior.mean, mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(posterior.covariance_matrix, covar, rtol=0, atol=1e-8)


def test_real_features_give_the_ordinary_posterior():
    x, y = _data()
    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    complex_choice = (
        ExactGPModel(x, y, likelihood, ScaleKernel(RandomFourierKernel(64, num_dims=4, seed=0, posterior="complex")))
        .double()
        .eval()
    )
    ordinary = ExactGPModel(x, y, likelihood, ScaleKernel(RandomFourierKernel(64, num_dims=4, seed=0))).double().eval()
    test_x = x[:9] + 0.05
    a, b = complex_choice(test_x), ordinary(test_x)
    assert type(complex_choice.prediction_strategy) is FeatureSpacePredictionStrategy
    torch.testing.assert_close(a.mean, b.mean)
    torch.testing.assert_close(a.covariance_matrix, b.covariance_matrix)


def test_skip_variances_and_training_uses_real_part_kernel():
    x, y = _data()
    model = _model(x, y, gpytorch.likelihoods.GaussianLikelihood())
    with gpytorch.settings.skip_posterior_variances():
        assert torch.isfinite(model(x[:3]).mean).all()
    model.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    loss = -mll(model(x), y)
    loss.backward()
    assert torch.isfinite(loss)


def test_bad_input():
    x, y = _data(n=20)
    model = _model(x, y, gpytorch.likelihoods.GaussianLikelihood())
    # A covariance that is not the lazily evaluated kernel: the complex posterior refuses instead of
    # silently answering with the real-part kernel's.
    strategy = ComplexFeaturePredictionStrategy(
        [x],
        gpytorch.distributions.MultivariateNormal(
            torch.zeros(20, dtype=torch.float64), torch.eye(20, dtype=torch.float64)
        ),
        y,
        model.likelihood,
    )
    with pytest.raises(ValueError, match="posterior='complex' needs"):
        strategy.exact_prediction(
            torch.zeros(2, dtype=torch.float64),
            DenseLinearOperator(torch.eye(2, dtype=torch.float64)),
            DenseLinearOperator(torch.zeros(2, 20, dtype=torch.float64)),
        )


def test_botorch_posterior_fantasize_and_qlognei():
    pytest.importorskip("botorch")
    from botorch.acquisition.logei import qLogNoisyExpectedImprovement
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Normalize, Standardize
    from botorch.optim import optimize_acqf
    from botorch.sampling import SobolQMCNormalSampler

    x, y = _data(n=40, d=3)
    sketch_kernel = PolynomialSketchKernel(
        32, num_dims=3, degree=3, sketch="srht", complex=True, bias=1.0, posterior="complex", seed=0
    )
    kernel = ScaleKernel(sketch_kernel)
    model = SingleTaskGP(
        x, y.unsqueeze(-1), covar_module=kernel, input_transform=Normalize(3), outcome_transform=Standardize(1)
    )
    model.eval()
    test_x = torch.rand(6, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    posterior = model.posterior(test_x)
    assert type(model.prediction_strategy) is ComplexFeaturePredictionStrategy
    assert posterior.mean.shape == (6, 1) and (posterior.variance > 0).all()
    fantasy = model.fantasize(test_x[:2], sampler=SobolQMCNormalSampler(sample_shape=torch.Size([3]), seed=0))
    assert fantasy.posterior(test_x).mean.shape == (3, 6, 1)
    acquisition = qLogNoisyExpectedImprovement(
        model, X_baseline=x, sampler=SobolQMCNormalSampler(sample_shape=torch.Size([16]), seed=0)
    )
    bounds = torch.stack([torch.zeros(3), torch.ones(3)]).double()
    candidate, value = optimize_acqf(
        acquisition, bounds=bounds, q=2, num_restarts=2, raw_samples=16, options={"maxiter": 5}
    )
    assert candidate.shape == (2, 3) and torch.isfinite(value)
