"""gprf.kernels.exact_expression: ScaleKernel wrappers share outputscale, constraint and prior; sums become
AdditiveKernel of their summands' exact kernels; exact GPyTorch kernels pass through."""

from __future__ import annotations

import torch
from gpytorch.constraints import Interval
from gpytorch.kernels import AdditiveKernel, RBFKernel, ScaleKernel
from gpytorch.priors import GammaPrior

from gprf.kernels import FeatureSumKernel, LinearFeatureKernel, RandomFourierKernel, exact_expression
from gprf.kernels.exact_expression import scale_like


def test_scale_like_shares_outputscale_constraint_and_prior():
    source = ScaleKernel(RBFKernel(), outputscale_prior=GammaPrior(2.0, 0.5), outputscale_constraint=Interval(0, 5))
    scaled = scale_like(RBFKernel(), source)
    assert scaled.raw_outputscale is source.raw_outputscale
    assert scaled.raw_outputscale_constraint is source.raw_outputscale_constraint
    priors = {name: prior for name, _, prior, *_ in scaled.named_priors()}
    assert priors["outputscale_prior"] is source.outputscale_prior


def test_exact_expression_of_a_scaled_sum():
    rff = ScaleKernel(RandomFourierKernel(16, num_dims=2, seed=0))
    total = ScaleKernel(FeatureSumKernel(rff, LinearFeatureKernel(2))).double()
    exact = exact_expression(total)
    assert isinstance(exact, ScaleKernel) and isinstance(exact.base_kernel, AdditiveKernel)
    inner = exact.base_kernel.kernels[0]
    assert (
        inner.raw_outputscale is rff.raw_outputscale
        and inner.base_kernel.raw_lengthscale is rff.base_kernel.raw_lengthscale
    )
    x = torch.randn(5, 2, dtype=torch.float64)
    expected = total.outputscale * (
        rff.outputscale * RBFKernel().double()(x).to_dense() + x @ x.mT * 0.6931471805599453
    )
    torch.testing.assert_close(exact(x).to_dense(), expected.detach(), rtol=1e-6, atol=1e-8)
    plain = RBFKernel()
    assert exact_expression(plain) is plain
    # GPyTorch's own sum (ScaleKernel(k1) + k2 goes through GPyTorch's __add__) is rebuilt around exact parts.
    dense_sum = exact_expression(rff + LinearFeatureKernel(2).double())
    assert isinstance(dense_sum, AdditiveKernel) and isinstance(dense_sum.kernels[0].base_kernel, RBFKernel)
