"""Draws made without ``seed=`` follow ``torch.manual_seed`` and leave torch's global generator where it was."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel

import gprf
from gprf.features import Skeleton, delta_gaussian_spectrum
from gprf.features.unseeded import unseeded_seed
from gprf.kernels import (
    AdditiveFeatureKernel,
    ArcCosineQuadratureKernel,
    CompositionalRandomFeatureKernel,
    FeatureProductKernel,
    LocalizedMaclaurinKernel,
    MaclaurinKernel,
    PolynomialSketchKernel,
    PreconditionedKernel,
    QuadratureKernel,
    RandomFourierKernel,
    SignedRandomFeatureKernel,
    unwrap_scale_kernel,
)
from gprf.testing.models import ExactGPModel


def test_unseeded_seed_reads_the_global_state_without_advancing_it():
    torch.manual_seed(0)
    state = torch.get_rng_state()
    first, second = unseeded_seed(), unseeded_seed()
    assert torch.equal(torch.get_rng_state(), state)
    assert first != second  # two maps built one after the other draw independently
    torch.manual_seed(1)
    other = unseeded_seed()
    torch.manual_seed(0)
    assert [unseeded_seed(), unseeded_seed()] == [first, second]  # the script's draws repeat after the same seed
    assert other not in (first, second)
    assert 0 <= first < 2**62


KERNEL_FAMILIES = {
    "rff_iid": lambda: RandomFourierKernel(64, num_dims=3),
    "rff_orthogonal": lambda: RandomFourierKernel(64, num_dims=3, sampler="orthogonal"),
    "rff_structured": lambda: RandomFourierKernel(64, num_dims=3, sampler="structured"),
    "rff_qmc": lambda: RandomFourierKernel(64, num_dims=3, sampler="qmc", kernel="matern52"),
    "maclaurin": lambda: MaclaurinKernel(64, num_dims=3),
    "localized_maclaurin": lambda: LocalizedMaclaurinKernel(64, num_dims=3),
    "polynomial_sketch": lambda: PolynomialSketchKernel(64, num_dims=3, degree=2, sketch="srht"),
    "offset_polynomial_sketch": lambda: gprf.random_features(
        gpytorch.kernels.PolynomialKernel(power=2), num_features=64, num_dims=3
    ),
    "quadrature_haar": lambda: QuadratureKernel(num_rules=2, num_dims=3),
    "quadrature_butterfly": lambda: QuadratureKernel(num_rules=2, num_dims=4, rotation="butterfly"),
    "arc_cosine": lambda: ArcCosineQuadratureKernel(num_rules=2, num_dims=3, order=1),
    "signed": lambda: SignedRandomFeatureKernel(
        16, delta_gaussian_spectrum(weights=[1.0, -1.0], lengthscales=[1.0, 10.0]), num_dims=3
    ),
    "compositional": lambda: CompositionalRandomFeatureKernel(
        Skeleton.fully_connected(3, num_layers=2, activation="relu"), num_features=64
    ),
    "additive": lambda: AdditiveFeatureKernel(16, num_dims=3, order=2, features_per_pair=4),
    "product": lambda: FeatureProductKernel(
        RandomFourierKernel(64, num_dims=2, active_dims=[0, 1]),
        RandomFourierKernel(64, num_dims=1, kernel="matern32", active_dims=[2]),
        num_features=64,
        method="permutation",
    ),
    "random_features": lambda: gprf.random_features(
        ScaleKernel(RBFKernel(active_dims=[0, 1]) * MaternKernel(nu=2.5, active_dims=[2])), num_features=64, num_dims=3
    ),
    "preconditioned_rff": lambda: PreconditionedKernel(ScaleKernel(RBFKernel(ard_num_dims=3)), num_features=32),
    "preconditioned_nystrom": lambda: PreconditionedKernel(
        ScaleKernel(RBFKernel(ard_num_dims=3)), num_features=32, preconditioner="nystrom"
    ),
}


@pytest.mark.parametrize("family", sorted(KERNEL_FAMILIES))
def test_unseeded_kernels_leave_the_global_generator_untouched(family):
    torch.manual_seed(0)
    state = torch.get_rng_state()
    kernel = KERNEL_FAMILIES[family]()
    unwrap_scale_kernel(kernel).resample_features()
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize("family", ["rff_iid", "compositional", "product", "random_features"])
def test_unseeded_kernels_repeat_after_torch_manual_seed(family):
    x = torch.rand(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(3))

    def covariance_after_seed(seed: int) -> torch.Tensor:
        torch.manual_seed(seed)
        kernel = KERNEL_FAMILIES[family]().double()
        return kernel(x).to_dense()

    # Each seeding moves the global state, so each build below is the first unseeded draw from its state.
    other = covariance_after_seed(1)
    first = covariance_after_seed(0)
    assert torch.equal(covariance_after_seed(1), other)
    assert torch.equal(covariance_after_seed(0), first)
    assert not torch.allclose(other, first)


def test_unseeded_fit_leaves_the_global_generator_untouched():
    generator = torch.Generator().manual_seed(4)
    x = torch.rand(40, 2, dtype=torch.float64, generator=generator)
    y = torch.sin(3 * x).sum(-1)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    model = ExactGPModel(x, y, likelihood, ScaleKernel(RandomFourierKernel(32, num_dims=2, seed=0))).double()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    torch.manual_seed(0)
    state = torch.get_rng_state()
    gprf.fit_mll(mll, time_budget=1.0, tune_steps=5, seed=None)
    assert torch.equal(torch.get_rng_state(), state)
