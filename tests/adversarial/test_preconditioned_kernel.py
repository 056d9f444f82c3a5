"""Adversarial use of :class:`gprf.kernels.PreconditionedKernel`: arguments it must refuse, non-finite and
empty inputs, generators that are not generators, and the exact covariance it must keep whatever its
preconditioner."""

from __future__ import annotations

import math

import gpytorch
import pytest
import torch
from gpytorch.kernels import PeriodicKernel, RBFKernel, ScaleKernel

from gprf.kernels import PreconditionedKernel, RandomFourierKernel
from gprf.testing import ExactGPModel, regression_data

X, Y = regression_data(n=40, d=2)


def _kernel(**kwargs):
    return PreconditionedKernel(ScaleKernel(RBFKernel(ard_num_dims=2)), 16, seed=0, **kwargs).double()


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: PreconditionedKernel(RBFKernel(ard_num_dims=2), 0), ValueError, "num_features must be a positive"),
        (lambda: PreconditionedKernel("rbf", 8), TypeError, "base_kernel must be a GPyTorch Kernel, got str"),
        (lambda: _kernel(preconditioner="foo"), ValueError, "Unknown preconditioner 'foo'"),
        (lambda: _kernel(block_rows=0), ValueError, "block_rows must be a positive number of rows or None, got 0"),
        (lambda: _kernel(block_rows=2.5), ValueError, "block_rows must be a positive number of rows"),
        (
            lambda: PreconditionedKernel(RandomFourierKernel(8, num_dims=2), 8),
            TypeError,
            "base_kernel must be an exact kernel, but it holds the random-feature kernel RandomFourierKernel",
        ),
        (
            lambda: PreconditionedKernel(PeriodicKernel(ard_num_dims=2), 8),
            TypeError,
            r"cannot convert base_kernel: .* \(or use preconditioner='nystrom'",
        ),
        (lambda: PreconditionedKernel(RBFKernel(), 8), ValueError, "does not tell its input dimension"),
        (lambda: _kernel(sampler="foo"), ValueError, "Unknown sampler 'foo'"),
    ],
)
def test_bad_arguments_are_refused_naming_them(build, error, match):
    with pytest.raises(error, match=match):
        build()


@pytest.mark.parametrize("preconditioner", ["random_features", "nystrom"])
def test_a_generator_argument_that_is_not_a_generator_names_the_fix(preconditioner):
    with pytest.raises(TypeError, match="generator must be a torch.Generator or None, got int"):
        _kernel(preconditioner=preconditioner).resample_features(3)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_inputs_are_refused_naming_the_rows(bad):
    x = X[:5].clone()
    x[3, 1] = bad
    with pytest.raises(
        ValueError, match=r"PreconditionedKernel received NaN or infinite inputs in 1 of 5 rows \(rows 3\)"
    ):
        _kernel()(x).to_dense()
    with pytest.raises(ValueError, match="NaN or infinite"):
        _kernel()(X[:2], x).to_dense()


def test_inputs_of_another_width_fail_in_the_base_kernel_as_documented():
    """The exact base kernel sees the inputs first (GPyTorch's RBFKernel with two ARD lengthscales)."""
    with pytest.raises(RuntimeError, match="must match the size of tensor b"):
        _kernel()(torch.randn(5, 3, dtype=torch.float64)).to_dense()


def test_no_rows_give_an_empty_covariance():
    assert _kernel()(X[:0]).to_dense().shape == (0, 0)


@pytest.mark.parametrize("preconditioner", ["random_features", "nystrom"])
def test_the_covariance_is_the_exact_one_and_a_resample_does_not_change_it(preconditioner):
    kernel = _kernel(preconditioner=preconditioner)
    exact = kernel.base_kernel(X).to_dense()
    torch.testing.assert_close(kernel(X).to_dense(), exact, rtol=0, atol=0)
    kernel.resample_features(torch.Generator().manual_seed(4))
    torch.testing.assert_close(kernel(X).to_dense(), exact, rtol=0, atol=0)
    torch.testing.assert_close(kernel(X, diag=True), exact.diagonal(), rtol=1e-12, atol=1e-12)


def test_more_nystrom_points_than_training_points_still_gives_the_exact_marginal_likelihood():
    kernel = PreconditionedKernel(ScaleKernel(RBFKernel(ard_num_dims=2)), 100, preconditioner="nystrom", seed=0)
    model = ExactGPModel(X, Y, gpytorch.likelihoods.GaussianLikelihood(), kernel).double()
    reference = ExactGPModel(X, Y, gpytorch.likelihoods.GaussianLikelihood(), ScaleKernel(RBFKernel(ard_num_dims=2)))
    reference = reference.double().train()
    model.train()
    value = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)(model(X), Y)
    expected = gpytorch.mlls.ExactMarginalLogLikelihood(reference.likelihood, reference)(reference(X), Y)
    torch.testing.assert_close(value, expected, rtol=1e-8, atol=1e-10)


def test_extra_kernel_arguments_are_refused():
    with pytest.raises(TypeError, match="takes no extra kernel arguments"):
        _kernel().forward(X, X, foo=1)


def test_last_dim_is_batch_is_refused():
    with pytest.raises(NotImplementedError, match="last_dim_is_batch"):
        _kernel().forward(X, X, last_dim_is_batch=True)
