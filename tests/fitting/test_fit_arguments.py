"""Every option of ``gprf.fit_mll`` is checked up front, with an error that names it; ``seed=None`` draws a seed."""

from __future__ import annotations

import math

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import GaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood

import gprf
from gprf.kernels import RandomFourierKernel


class _GP(gpytorch.models.ExactGP):
    def __init__(self, x, y):
        super().__init__(x, y, GaussianLikelihood())
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = ScaleKernel(RandomFourierKernel(64, num_dims=2, seed=0))

    def forward(self, x):
        return gprf.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _mll(n: int = 120) -> ExactMarginalLogLikelihood:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(n, 2, generator=generator, dtype=torch.float64)
    y = torch.sin(5 * x[:, 0]) + 0.1 * torch.randn(n, generator=generator, dtype=torch.float64)
    model = _GP(x, y).double()
    return ExactMarginalLogLikelihood(model.likelihood, model)


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"time_budget": 0.0}, ValueError, "time_budget must be positive seconds"),
        ({"time_budget": -1}, ValueError, "time_budget must be positive seconds"),
        ({"time_budget": math.nan}, ValueError, "time_budget must be positive seconds"),
        ({"time_budget": "60"}, TypeError, "time_budget must be positive seconds"),
        ({"time_budget": True}, TypeError, "time_budget"),
        ({"tune_features": 0}, ValueError, r"tune_features must be >= 1"),
        ({"tune_features": -8}, ValueError, r"tune_features must be >= 1"),
        ({"tune_features": 16.0}, TypeError, "tune_features must be an integer >= 1 or None"),
        ({"tune_rows": 0}, ValueError, r"tune_rows must be >= 1 \(rows of the subsample\), got 0"),
        ({"tune_rows": -100}, ValueError, r"tune_rows must be >= 1"),
        ({"tune_rows": 1e3}, TypeError, "tune_rows must be an integer"),
        ({"tune_steps": -1}, ValueError, r"tune_steps must be >= 0"),
        ({"tune_steps": None}, TypeError, r"tune_steps must be an integer >= 0 \(Adam steps\)"),
        ({"tune_steps": 2.5}, TypeError, "tune_steps must be an integer"),
        ({"lr": 0.0}, ValueError, "lr must be a positive finite float"),
        ({"lr": -0.1}, ValueError, "lr must be a positive finite float"),
        ({"lr": math.inf}, ValueError, "lr must be a positive finite float"),
        ({"lr": "0.1"}, TypeError, "lr must be a positive finite float"),
        ({"finish_steps": -3}, ValueError, r"finish_steps must be >= 0"),
        ({"finish_steps": 1.5}, TypeError, "finish_steps must be an integer >= 0 or None"),
        ({"seed": -1}, ValueError, r"seed must be an integer in \[0, 2\*\*63\)"),
        ({"seed": 2**63}, ValueError, r"seed must be an integer in \[0, 2\*\*63\)"),
        ({"seed": 1.0}, TypeError, "seed must be an integer"),
        ({"seed": torch.Generator()}, TypeError, "seed must be an integer"),
        ({"progress": "yes"}, TypeError, "progress must be True or False"),
        ({"callback": 3}, TypeError, "callback must be callable"),
    ],
)
def test_bad_options_are_refused_by_name(options, error, match):
    mll = _mll()
    state = {name: value.clone() for name, value in mll.state_dict().items()}
    with pytest.raises(error, match=match):
        gprf.fit_mll(mll, **options)
    # Refused before anything ran: the model is untouched.
    assert all(torch.equal(value, state[name]) for name, value in mll.state_dict().items())


def _fitted_parameters(seed) -> list[torch.Tensor]:
    mll = _mll(300)
    gprf.fit_mll(mll, tune_rows=100, tune_features=16, tune_steps=5, seed=seed)
    return [parameter.detach().clone() for parameter in mll.parameters()]


def test_seed_none_follows_torch_manual_seed_without_advancing_the_global_generator():
    torch.manual_seed(11)
    state = torch.get_rng_state()
    with_none = _fitted_parameters(None)
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(12)
    other = _fitted_parameters(None)
    torch.manual_seed(11)
    again = _fitted_parameters(None)
    assert all(torch.equal(a, b) for a, b in zip(with_none, again, strict=True))
    # Another torch seed takes other rows, hence another tuning trajectory.
    assert not all(torch.equal(a, b) for a, b in zip(with_none, other, strict=True))
