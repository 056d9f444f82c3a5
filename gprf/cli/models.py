"""The GP regression model used by the ``gprf`` subcommands: build, fit, copy hyperparameters, predict."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import gpytorch
import torch
from gpytorch.kernels import Kernel, ScaleKernel
from torch import Tensor

from gprf.cli.kernel_spec import is_composite_spec, parse_kernel_spec
from gprf.distributions import MultivariateNormal
from gprf.kernels.exact import exact_target, stationary_targets

#: ``--kernel`` choices: the stationary exact targets (:mod:`gprf.kernels.exact.targets`), which name the exact kernels.
EXACT_KERNELS = tuple(target.name for target in stationary_targets())

#: Problem sizes up to which exact GPs use a Cholesky factorisation (GPyTorch's default switches to CG at 800).
CHOLESKY_MAX_SIZE = 100_000


def exact_kernel(name: str, num_dims: int) -> Kernel:
    """The ARD exact kernel of ``--kernel name`` (GPyTorch's ``RBFKernel`` or ``MaternKernel``), or the expression of a
    composite spec (:mod:`gprf.cli.kernel_spec`)."""
    if is_composite_spec(name):
        return parse_kernel_spec(name, num_dims)
    if name in EXACT_KERNELS:
        return exact_target(name).build(ard_num_dims=num_dims)
    raise ValueError(f"Unknown kernel {name!r}; valid choices are: {', '.join(EXACT_KERNELS)}.")


class RegressionGP(gpytorch.models.ExactGP):
    """``ConstantMean`` + ``ScaleKernel(base_kernel)`` + ``GaussianLikelihood``.

    ``forward`` returns :class:`gprf.distributions.MultivariateNormal`, which is GPyTorch's class for every kernel
    but keeps gprf kernels' exact structured marginal likelihood in processes that imported BoTorch.
    """

    def __init__(self, train_x: Tensor, train_y: Tensor, base_kernel: Kernel) -> None:
        likelihood = gpytorch.likelihoods.GaussianLikelihood()
        super().__init__(train_x, train_y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = ScaleKernel(base_kernel)
        self.to(device=train_x.device, dtype=train_x.dtype)

    def forward(self, x: Tensor) -> MultivariateNormal:
        return MultivariateNormal(self.mean_module(x), self.covar_module(x))


@dataclass(frozen=True)
class Hyperparameters:
    """Constrained hyperparameter values of a :class:`RegressionGP` (detached)."""

    mean_constant: Tensor
    outputscale: Tensor
    lengthscale: Tensor | None
    noise: Tensor
    #: A copy of the fitted base kernel when it is a composite expression (whose parts hold the other values).
    expression: Kernel | None = None

    def describe(self) -> str:
        parts = [f"mean={self.mean_constant.item():.4g}", f"outputscale={self.outputscale.item():.4g}"]
        if self.lengthscale is not None:
            values = self.lengthscale.flatten().tolist()
            parts.append("lengthscale=[" + ", ".join(f"{v:.3g}" for v in values) + "]")
        parts.append(f"noise={self.noise.flatten()[0].item():.4g}")
        return ", ".join(parts)


def get_hyperparameters(model: RegressionGP) -> Hyperparameters:
    base = model.covar_module.base_kernel
    return Hyperparameters(
        mean_constant=model.mean_module.constant.detach().clone(),
        outputscale=model.covar_module.outputscale.detach().clone(),
        lengthscale=base.lengthscale.detach().clone() if base.has_lengthscale else None,
        noise=model.likelihood.noise.detach().clone(),
    )


def set_hyperparameters(model: RegressionGP, hyper: Hyperparameters) -> None:
    """Copy ``hyper`` into ``model`` through the constraints (lengthscale only if the kernel has one)."""
    params = next(model.parameters())
    model.mean_module.constant = hyper.mean_constant.to(params)
    model.covar_module.outputscale = hyper.outputscale.to(params)
    model.likelihood.noise = hyper.noise.to(params)
    base = model.covar_module.base_kernel
    if base.has_lengthscale and hyper.lengthscale is not None:
        base.lengthscale = hyper.lengthscale.to(params).expand_as(base.lengthscale)


def initialize_hyperparameters(model: RegressionGP, lengthscale: float, noise: float = 0.1) -> None:
    """A neutral start for standardised data: unit amplitude, given lengthscale, noise 0.1. The parts of a composite
    expression start at the square root of the number of their lengthscales (1 for one shared lengthscale)."""
    model.covar_module.outputscale = 1.0
    model.likelihood.noise = noise
    base = model.covar_module.base_kernel
    if base.has_lengthscale:
        base.lengthscale = torch.full_like(base.lengthscale, lengthscale)
        return
    for part in base.modules():
        if isinstance(part, Kernel) and part.has_lengthscale:
            part.lengthscale = torch.full_like(part.lengthscale, math.sqrt(part.lengthscale.size(-1)))


def fit_hyperparameters(
    model: RegressionGP,
    iterations: int,
    learning_rate: float = 0.1,
    optimizer: str = "adam",
    callback: Callable[[int, float], None] | None = None,
) -> float:
    """Maximise the exact marginal likelihood on ``model``'s training data; returns the final loss (-MLL/N).

    ``optimizer="adam"``: ``iterations`` Adam steps; ``"lbfgs"``: L-BFGS with a strong-Wolfe line search
    and at most ``iterations`` function evaluations. Exact GPs use a Cholesky factorisation up to
    :data:`CHOLESKY_MAX_SIZE` points.
    """
    model.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    train_x, train_y = model.train_inputs[0], model.train_targets
    params = [p for p in model.parameters() if p.requires_grad]

    def loss_fn() -> Tensor:
        return -mll(model(train_x), train_y)

    with gpytorch.settings.max_cholesky_size(CHOLESKY_MAX_SIZE):
        if optimizer == "adam":
            opt = torch.optim.Adam(params, lr=learning_rate)
            for step in range(iterations):
                opt.zero_grad()
                loss = loss_fn()
                loss.backward()
                opt.step()
                if callback is not None:
                    callback(step, loss.item())
        elif optimizer == "lbfgs":
            opt = torch.optim.LBFGS(params, lr=1.0, max_iter=iterations, line_search_fn="strong_wolfe")

            def closure() -> Tensor:
                opt.zero_grad()
                loss = loss_fn()
                loss.backward()
                return loss

            opt.step(closure)
        else:
            raise ValueError(f"Unknown optimizer {optimizer!r}; use 'adam' or 'lbfgs'.")
        with torch.no_grad():
            final = loss_fn().item()
    model.eval()
    return final


def predict(model: RegressionGP, x: Tensor, noisy: bool = True) -> tuple[Tensor, Tensor]:
    """Predictive mean and marginal variances at ``x`` (including the observation noise if ``noisy``)."""
    model.eval()
    with torch.no_grad(), gpytorch.settings.max_cholesky_size(CHOLESKY_MAX_SIZE):
        latent = model(x)
        output = model.likelihood(latent) if noisy else latent
        return output.mean, output.variance
