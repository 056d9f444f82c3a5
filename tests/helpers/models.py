"""The plain GPyTorch model with gprf's distribution, as the fitting and kernel-algebra tests build it."""

from __future__ import annotations

import torch
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import GaussianLikelihood

import gprf
from gprf.testing import ExactGPModel


class GprfDistributionGP(ExactGPModel):
    """The plain model with gprf's distribution, whose log density is the structured one under every setting."""

    def forward(self, x):
        return gprf.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def scaled_gp(x, y, kernel, likelihood=None) -> GprfDistributionGP:
    """A constant mean, ``ScaleKernel(kernel)`` and ``likelihood`` (a fresh ``GaussianLikelihood`` by default)."""
    return GprfDistributionGP(x, y, GaussianLikelihood() if likelihood is None else likelihood, ScaleKernel(kernel))


def training_mll(mll) -> float:
    """GPyTorch's marginal likelihood of the training data per point (with the priors), in training mode."""
    model = mll.model
    mll.train()
    with torch.no_grad():
        return float(mll(model(*model.train_inputs), model.train_targets))
