"""A plain GPyTorch model around a kernel, reproducible regression data and marginal-likelihood training: what a
test needs to check a kernel inside a GP the way users run one."""

from __future__ import annotations

import gpytorch
import torch
from torch import Tensor


class ExactGPModel(gpytorch.models.ExactGP):
    """The plain GPyTorch model users have: a constant mean and the kernel under test as ``covar_module``."""

    def __init__(self, train_x, train_y, likelihood, covar_module, batch_shape=torch.Size()):
        super().__init__(train_x, train_y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean(batch_shape=batch_shape)
        self.covar_module = covar_module

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def regression_data(
    n: int = 80, d: int = 3, seed: int = 0, dtype: torch.dtype = torch.float64, batch_shape=()
) -> tuple[Tensor, Tensor]:
    r"""``n`` inputs uniform on :math:`[0, 1]^d` and targets :math:`\sum_j \sin(4x_j) + 0.1\,\varepsilon`, from a
    generator seeded ``seed`` (the global RNG is untouched)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(*batch_shape, n, d, generator=generator, dtype=dtype)
    y = torch.sin(4 * x).sum(-1) + 0.1 * torch.randn(*batch_shape, n, generator=generator, dtype=dtype)
    return x, y


def train_by_mll(model, x: Tensor, y: Tensor, steps: int, lr: float = 0.05) -> list[float]:
    """Adam on GPyTorch's exact marginal likelihood (the user's usual loop); returns the losses."""
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
