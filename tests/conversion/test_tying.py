"""gprf.conversion.tying: tied parameters are the source's objects (with constraints and priors), and the input
dimension of a part comes from its active_dims, its ard_num_dims or the call, with clear errors."""

from __future__ import annotations

import pytest
from gpytorch.constraints import Interval
from gpytorch.kernels import RBFKernel
from gpytorch.priors import GammaPrior

from gprf.conversion.budget import Budget
from gprf.conversion.registry import Context
from gprf.conversion.tying import input_dim, tie
from gprf.kernels import RandomFourierKernel


def _context(num_dims=None) -> Context:
    return Context("kernels.0", 8, Budget(None), "iid", "srht", 0, num_dims)


def test_tie_shares_parameter_constraint_and_prior():
    source = RBFKernel(lengthscale_prior=GammaPrior(3.0, 6.0), lengthscale_constraint=Interval(0.1, 4.0))
    target = tie(RandomFourierKernel(8, num_dims=2, seed=0), source, "raw_lengthscale")
    assert target.raw_lengthscale is source.raw_lengthscale
    assert target.raw_lengthscale_constraint is source.raw_lengthscale_constraint
    assert {name: prior for name, _, prior, *_ in target.named_priors()}["lengthscale_prior"] is (
        source.lengthscale_prior
    )


def test_input_dim_sources_and_errors():
    assert input_dim(RBFKernel(active_dims=[0, 3]), _context()) == 2
    assert input_dim(RBFKernel(ard_num_dims=4), _context()) == 4
    assert input_dim(RBFKernel(), _context(num_dims=5)) == 5
    with pytest.raises(ValueError, match="kernels.0: RBFKernel does not tell its input dimension.*num_dims=d"):
        input_dim(RBFKernel(), _context())
    with pytest.raises(ValueError, match="kernels.0: RBFKernel has active_dims selecting 1 columns but ard_num_dims=2"):
        input_dim(RBFKernel(ard_num_dims=2, active_dims=[0]), _context())
