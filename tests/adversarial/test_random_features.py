"""Adversarial inputs to :func:`gprf.random_features`: bad sizes, samplers, seeds, budgets and kernels it cannot
translate; what it returns shares the very hyperparameters of the expression it translates."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.kernels import LinearKernel, MaternKernel, PeriodicKernel, RBFKernel, ScaleKernel

import gprf
from gprf.kernels import FeatureSumKernel, RandomFourierKernel, exact_expression


@pytest.mark.parametrize(
    ("kernel", "kwargs", "error", "match"),
    [
        (RBFKernel(), {"num_features": 0, "num_dims": 3}, ValueError, "num_features must be a positive integer, got 0"),
        (RBFKernel(), {"num_features": -4, "num_dims": 3}, ValueError, "num_features must be a positive integer"),
        (RBFKernel(), {"num_features": 8.0, "num_dims": 3}, ValueError, "num_features must be a positive integer"),
        (RBFKernel(), {"num_features": 8, "num_dims": 0}, ValueError, "num_dims must be a positive integer, got 0"),
        (RBFKernel(), {"num_features": 8}, ValueError, "does not tell its input dimension .* pass num_dims=d"),
        (RBFKernel(), {"num_features": 8, "num_dims": 3, "sampler": "x"}, ValueError, "Unknown sampler 'x'"),
        (RBFKernel(), {"num_features": 8, "num_dims": 3, "sketch": "x"}, ValueError, "Unknown sketch 'x'"),
        (RBFKernel(), {"num_features": 8, "num_dims": 3, "seed": "a"}, TypeError, "seed must be an int or None"),
        (RBFKernel(), {"num_features": 8, "num_dims": 3, "seed": 1.0}, TypeError, "seed must be an int or None"),
        ("rbf", {"num_features": 8, "num_dims": 3}, TypeError, "kernel must be a GPyTorch Kernel, got str"),
        (PeriodicKernel(), {"num_features": 8, "num_dims": 3}, TypeError, "PeriodicKernel has no random-feature"),
        (
            ScaleKernel(RBFKernel() + PeriodicKernel()),
            {"num_features": 8, "num_dims": 3},
            TypeError,
            r"base_kernel.kernels.1: PeriodicKernel",
        ),
        (
            RBFKernel(),
            {"num_features": 8, "num_dims": 3, "budget": {"foo": 3}},
            ValueError,
            r"budget names parts that are not random parts .* \['foo'\]",
        ),
        (
            RBFKernel() + RBFKernel(),
            {"num_features": 8, "num_dims": 3, "budget": {"kernels.0": -3}},
            ValueError,
            r"budget\['kernels.0'\]: the number of features must be a positive integer, got -3",
        ),
        (
            RBFKernel() + RBFKernel(),
            {"num_features": 1, "num_dims": 3},
            ValueError,
            "num_features is too small: 1 feature",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_bad_arguments_are_refused_naming_them(kernel, kwargs, error, match):
    with pytest.raises(error, match=match):
        gprf.random_features(kernel, **kwargs)


def test_the_translation_shares_every_parameter_object(float64):
    exact = ScaleKernel(RBFKernel(ard_num_dims=2)) + ScaleKernel(MaternKernel(nu=1.5, ard_num_dims=2))
    approximation = gprf.random_features(exact, 64, seed=0)
    assert isinstance(approximation, FeatureSumKernel)
    assert {id(p) for p in approximation.parameters()} == {id(p) for p in exact.parameters()}
    with torch.no_grad():
        exact.kernels[0].base_kernel.raw_lengthscale.fill_(1.5)
    torch.testing.assert_close(
        approximation.kernels[0].base_kernel.lengthscale, exact.kernels[0].base_kernel.lengthscale
    )


def test_the_exact_expression_of_the_translation_evaluates_to_the_original(float64):
    exact = ScaleKernel(RBFKernel(ard_num_dims=2)) + LinearKernel()
    approximation = gprf.random_features(exact, 64, seed=0, num_dims=2)
    x = torch.randn(6, 2)
    torch.testing.assert_close(exact_expression(approximation)(x).to_dense(), exact(x).to_dense())


def test_a_float32_expression_gives_a_float32_approximation():
    exact = RBFKernel(ard_num_dims=3).float()
    approximation = gprf.random_features(exact, 16, seed=0)
    assert approximation.lengthscale.dtype == torch.float32
    assert approximation(torch.randn(4, 3)).to_dense().dtype == torch.float32


def test_a_gprf_kernel_is_kept_as_it_is():
    kernel = RandomFourierKernel(16, num_dims=2, seed=0)
    assert gprf.random_features(kernel, 64) is kernel


def test_seeded_translations_repeat_and_other_seeds_differ(float64):
    x = torch.randn(5, 3)
    first, again, other = (gprf.random_features(RBFKernel(), 32, num_dims=3, seed=s)(x).to_dense() for s in (0, 0, 1))
    assert torch.equal(first, again) and not torch.allclose(first, other)


def test_an_index_kernel_is_translated_to_its_exact_root(float64):
    task = gpytorch.kernels.IndexKernel(num_tasks=3, rank=2)
    approximation = gprf.random_features(task, 8)
    indices = torch.tensor([[0], [1], [2], [1]])
    torch.testing.assert_close(approximation(indices).to_dense(), task(indices).to_dense())
