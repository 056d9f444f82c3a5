"""Helpers shared by the prediction tests (and others): the plain GPyTorch model users have, reproducible data, a
model with non-default hyperparameters, the dense weight-space posterior, marginal-likelihood training and an
optimizer step."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel

from gprf.kernels import RandomFourierKernel


class ExactModel(gpytorch.models.ExactGP):
    """The plain GPyTorch model users have: only the covariance module is swapped."""

    def __init__(self, train_x, train_y, likelihood, covar_module, batch_shape=torch.Size()):
        super().__init__(train_x, train_y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean(batch_shape=batch_shape)
        self.covar_module = covar_module

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def make_data(n: int = 80, d: int = 3, seed: int = 0, dtype=torch.float64, batch_shape=()):
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(*batch_shape, n, d, generator=generator, dtype=dtype)
    y = torch.sin(4 * x).sum(-1) + 0.1 * torch.randn(*batch_shape, n, generator=generator, dtype=dtype)
    return x, y


def make_model(x, y, likelihood=None, num_features=64, batch_shape=torch.Size(), seed=0):
    if likelihood is None:
        likelihood = gpytorch.likelihoods.GaussianLikelihood(batch_shape=batch_shape)
    kernel = ScaleKernel(
        RandomFourierKernel(
            num_features, num_dims=x.size(-1), ard_num_dims=x.size(-1), batch_shape=batch_shape, seed=seed
        ),
        batch_shape=batch_shape,
    )
    model = ExactModel(x, y, likelihood, kernel, batch_shape=batch_shape).to(x.dtype)
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


@pytest.fixture
def data64():
    return make_data()


def train_and_predict(model, x, y, test_x, test_y, steps: int = 60):
    """MLL training then the noisy predictive at ``test_x``: ``(losses, prediction, NMSE)``."""
    losses = train_by_mll(model, x, y, steps=steps)
    model.eval()
    with torch.no_grad():
        prediction = model.likelihood(model(test_x))
    return losses, prediction, ((prediction.mean - test_y) ** 2).mean() / test_y.var()


def train_by_mll(model, x, y, steps: int, lr: float = 0.05) -> list[float]:
    """Adam on the exact marginal likelihood (the user's usual loop); returns the losses."""
    model.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = -mll(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
