"""Regression models several folders' tests build on: a random-Fourier-feature GP with non-default hyperparameters
and its dense weight-space posterior, training and prediction loops, and a signed random-feature kernel of an
indefinite target with its model."""

from __future__ import annotations

import gpytorch
import torch
from gpytorch.kernels import ScaleKernel

from gprf.features import delta_gaussian_spectrum
from gprf.kernels import RandomFourierKernel, SignedRandomFeatureKernel
from gprf.testing import ExactGPModel, train_by_mll

# An indefinite delta-Gaussian target: 2 exp(-r^2 / 2) - exp(-r^2 / 18).
SPECTRUM = delta_gaussian_spectrum([2.0, -1.0], [1.0, 3.0])


def make_model(x, y, likelihood=None, num_features=64, batch_shape=torch.Size(), seed=0):
    if likelihood is None:
        likelihood = gpytorch.likelihoods.GaussianLikelihood(batch_shape=batch_shape)
    kernel = ScaleKernel(
        RandomFourierKernel(
            num_features, num_dims=x.size(-1), ard_num_dims=x.size(-1), batch_shape=batch_shape, seed=seed
        ),
        batch_shape=batch_shape,
    )
    model = ExactGPModel(x, y, likelihood, kernel, batch_shape=batch_shape).to(x.dtype)
    # Non-default hyperparameters so that every factor shows up in the comparisons.
    model.covar_module.outputscale = 1.7
    model.covar_module.base_kernel.lengthscale = torch.tensor([0.4, 0.7, 1.1][: x.size(-1)], dtype=x.dtype)
    model.mean_module.constant.data.fill_(0.3)
    if hasattr(likelihood, "noise") and not isinstance(likelihood, gpytorch.likelihoods.FixedNoiseGaussianLikelihood):
        likelihood.noise = 0.05
    return model


def weight_space_prediction(model, train_x, train_y, test_x, noise):
    """Direct weight-space posterior (paper-style formulas), computed densely in float64."""
    kernel = model.covar_module
    scale = kernel.outputscale.sqrt().unsqueeze(-1).unsqueeze(-1)
    r = (kernel.base_kernel.features(train_x) * scale).double()
    r_test = (kernel.base_kernel.features(test_x) * scale).double()
    mean_const = model.mean_module.constant.double().unsqueeze(-1)
    noise = noise.double()
    capacitance = torch.eye(r.size(-1), dtype=torch.float64) + r.mT @ (r / noise.unsqueeze(-1))
    rhs = r.mT @ ((train_y.double() - mean_const) / noise).unsqueeze(-1)
    mean = (r_test @ torch.linalg.solve(capacitance, rhs)).squeeze(-1) + mean_const
    covar = r_test @ torch.linalg.solve(capacitance, r_test.mT)
    return mean, covar


def optimizer_step(parameter: torch.nn.Parameter) -> None:
    """One SGD step on ``parameter`` with a unit gradient: an in-place write, as training in eval mode makes."""
    parameter.grad = torch.ones_like(parameter)
    torch.optim.SGD([parameter], lr=0.3).step()


def train_and_predict(model, x, y, test_x, test_y, steps: int = 60):
    """MLL training then the noisy predictive at ``test_x``: ``(losses, prediction, NMSE)``."""
    losses = train_by_mll(model, x, y, steps=steps)
    model.eval()
    with torch.no_grad():
        prediction = model.likelihood(model(test_x))
    return losses, prediction, ((prediction.mean - test_y) ** 2).mean() / test_y.var()


def signed_kernel(dtype: torch.dtype = torch.float64, **kwargs) -> ScaleKernel:
    """``ScaleKernel(SignedRandomFeatureKernel)`` of :data:`SPECTRUM`, non-default outputscale and ARD lengthscale."""
    kernel = ScaleKernel(SignedRandomFeatureKernel(48, SPECTRUM, num_dims=3, ard_num_dims=3, seed=0, **kwargs)).to(
        dtype
    )
    kernel.outputscale = 1.3
    kernel.base_kernel.lengthscale = torch.tensor([0.4, 0.7, 1.1], dtype=dtype)
    return kernel


def signed_model(x: torch.Tensor, y: torch.Tensor, kernel, noise: float = 0.1) -> ExactGPModel:
    """An ExactGP (constant mean 0.2, Gaussian likelihood of variance ``noise``) around ``kernel``."""
    likelihood = gpytorch.likelihoods.GaussianLikelihood().to(x.dtype)
    likelihood.noise = noise
    model = ExactGPModel(x, y, likelihood, kernel).to(x.dtype)
    model.mean_module.constant.data.fill_(0.2)
    return model
