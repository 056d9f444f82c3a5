"""Adversarial inputs to the kernels of :mod:`gprf.kernels`: construction arguments, inputs of the wrong width,
dtype, batch shape or finiteness, extreme hyperparameters, and the generators of ``resample_features``."""

from __future__ import annotations

import math

import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from gprf.features import delta_gaussian_spectrum
from gprf.kernels import (
    AdditiveFeatureKernel,
    ArcCosineKernel,
    ArcCosineQuadratureKernel,
    CompositionalRandomFeatureKernel,
    ExactAdditiveKernel,
    FeatureProductKernel,
    FeatureSumKernel,
    IndexRootKernel,
    LinearFeatureKernel,
    MaclaurinKernel,
    OffsetPolynomialSketchKernel,
    PolynomialSketchKernel,
    QuadratureKernel,
    RandomFourierKernel,
    ScaledPolynomialKernel,
    SignedRandomFeatureKernel,
    SphericalPolynomialKernel,
)
from gprf.testing import SEED

SPECTRUM = delta_gaussian_spectrum([2.0, -1.0], [1.0, 3.0])

#: Feature kernels on three input columns, one per family (the checks every family shares).
FAMILIES = {
    "fourier": lambda **kw: RandomFourierKernel(16, num_dims=3, seed=SEED, **kw),
    "maclaurin": lambda **kw: MaclaurinKernel(16, num_dims=3, seed=SEED, **kw),
    "sketch": lambda **kw: PolynomialSketchKernel(16, num_dims=3, degree=2, seed=SEED, **kw),
    "offset_sketch": lambda **kw: OffsetPolynomialSketchKernel(16, num_dims=3, degree=2, seed=SEED, **kw),
    "quadrature": lambda **kw: QuadratureKernel(1, num_dims=3, seed=SEED, **kw),
    "arc_cosine": lambda **kw: ArcCosineQuadratureKernel(1, num_dims=3, order=1, seed=SEED, **kw),
    "additive": lambda **kw: AdditiveFeatureKernel(4, num_dims=3, seed=SEED, **kw),
    "linear": lambda **kw: LinearFeatureKernel(num_dims=3, **kw),
    "signed": lambda **kw: SignedRandomFeatureKernel(8, SPECTRUM, num_dims=3, seed=SEED, **kw),
}
RANDOM_FAMILIES = {name: build for name, build in FAMILIES.items() if name != "linear"}


# ------------------------------------------------------------------------------------------------ construction
@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: RandomFourierKernel(0, num_dims=3), ValueError, "num_features must be a positive integer, got 0"),
        (lambda: RandomFourierKernel(-2, num_dims=3), ValueError, "num_features must be a positive integer, got -2"),
        (lambda: RandomFourierKernel(3, num_dims=3), ValueError, "must be even .* use 4"),
        (lambda: RandomFourierKernel(2.0, num_dims=3), ValueError, "num_features must be a positive integer, got 2.0"),
        (
            lambda: RandomFourierKernel(True, num_dims=3),
            ValueError,
            "num_features must be a positive integer, got True",
        ),
        (lambda: RandomFourierKernel(8, num_dims=0), ValueError, "num_dims must be a positive integer, got 0"),
        (lambda: RandomFourierKernel(8, num_dims=-1), ValueError, "num_dims must be a positive integer, got -1"),
        (lambda: RandomFourierKernel(8), ValueError, "needs the input dimension .* pass num_dims=d"),
        (lambda: RandomFourierKernel(8, num_dims=2, kernel="rbff"), ValueError, "Unknown kernel 'rbff'"),
        (lambda: RandomFourierKernel(8, num_dims=2, sampler="sobol"), ValueError, "Unknown sampler 'sobol'"),
        (lambda: RandomFourierKernel(8, num_dims=2, seed=1.5), TypeError, "seed must be an int or None, got 1.5"),
        (lambda: RandomFourierKernel(8, num_dims=3, ard_num_dims=2), ValueError, "ard_num_dims=2 does not match"),
        (
            lambda: RandomFourierKernel(8, num_dims=3, active_dims=[0, 1]),
            ValueError,
            r"num_dims=3 does not match the 2 active_dims \[0, 1\]",
        ),
        (lambda: MaclaurinKernel(0, num_dims=3), ValueError, "num_features must be a positive integer"),
        (lambda: MaclaurinKernel(8, num_dims=3, kernel="foo"), ValueError, "Unknown kernel 'foo'"),
        (lambda: PolynomialSketchKernel(8, num_dims=3, degree=-1), ValueError, "degree must be a non-negative"),
        (lambda: PolynomialSketchKernel(8, num_dims=3, degree=2, sketch="x"), ValueError, "Unknown sketch 'x'"),
        (lambda: QuadratureKernel(0, num_dims=3), ValueError, "num_rules must be a positive integer"),
        (lambda: ArcCosineQuadratureKernel(8, num_dims=3, order=5), ValueError, "order must be 0 or 1"),
        (lambda: AdditiveFeatureKernel(0, num_dims=3), ValueError, "features_per_dim must be a positive integer"),
        (
            lambda: AdditiveFeatureKernel(8, num_dims=3, features_per_pair=4),
            ValueError,
            "features_per_pair=4 sizes the pairwise interactions, which only order=2 has",
        ),
        (lambda: LinearFeatureKernel(num_dims=0), ValueError, "num_dims must be a positive integer, got 0"),
        (lambda: LinearFeatureKernel(num_dims=-3), ValueError, "num_dims must be a positive integer, got -3"),
        (lambda: CompositionalRandomFeatureKernel(8, num_dims=3), TypeError, "skeleton must be a gprf.features"),
        (lambda: SignedRandomFeatureKernel(8, "bad", num_dims=3), TypeError, "spectrum must be a SignedRadialSpectrum"),
        (lambda: IndexRootKernel(RBFKernel()), TypeError, "IndexRootKernel needs a GPyTorch IndexKernel"),
        (lambda: ArcCosineKernel(order=3), ValueError, "order must be 0 or 1 for ArcCosineKernel"),
        (lambda: ScaledPolynomialKernel(degree=-1), ValueError, "degree must be a non-negative integer"),
        (lambda: ScaledPolynomialKernel(degree=2, bias=-1), ValueError, "bias must be a finite number >= 0"),
        (lambda: ExactAdditiveKernel(order=3), ValueError, "order must be 1 or 2"),
        (lambda: SphericalPolynomialKernel(0.0, 2), ValueError, "a must be positive"),
        (lambda: SphericalPolynomialKernel(2.0, -1), ValueError, "degree must be a non-negative integer"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_bad_construction_arguments_are_refused_naming_them(build, error, match):
    with pytest.raises(error, match=match):
        build()


@pytest.mark.parametrize(
    ("parts", "error", "match"),
    [
        ((), ValueError, "FeatureSumKernel needs at least two kernels"),
        (("fourier",), ValueError, "FeatureSumKernel needs at least two kernels"),
        (("fourier", "rbf"), TypeError, "only adds random-feature kernels .* got RBFKernel"),
    ],
)
def test_feature_sums_refuse_too_few_or_dense_parts(parts, error, match):
    built = [RBFKernel() if part == "rbf" else FAMILIES[part]() for part in parts]
    with pytest.raises(error, match=match):
        FeatureSumKernel(*built)


@pytest.mark.parametrize(
    ("kwargs", "second", "error", "match"),
    [
        ({}, "rbf", TypeError, "only multiplies gprf feature kernels .* approximate it first"),
        ({"method": "foo"}, "maclaurin", ValueError, "Unknown method 'foo'"),
        ({"num_features": 0}, "maclaurin", ValueError, "num_features=0 must be an int of at least the number"),
        ({"num_features": 1}, "maclaurin", ValueError, "a product needs a column per factor"),
    ],
)
def test_feature_products_refuse_dense_factors_and_bad_sizes(kwargs, second, error, match):
    factor = RBFKernel() if second == "rbf" else FAMILIES[second]()
    with pytest.raises(error, match=match):
        FeatureProductKernel(FAMILIES["fourier"](), factor, **kwargs)


# ------------------------------------------------------------------------------------------------ inputs
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_inputs_of_another_width_name_num_dims(family):
    with pytest.raises(ValueError, match="num_dims"):
        FAMILIES[family]()(torch.randn(5, 4, dtype=torch.float64)).to_dense()


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_inputs_are_refused_naming_the_rows(family, bad):
    x = torch.randn(4, 3, dtype=torch.float64)
    x[2, 1] = bad
    with pytest.raises(ValueError, match=r"NaN or infinite inputs in 1 of 4 rows \(rows 2\)"):
        FAMILIES[family]()(x).to_dense()


@pytest.mark.parametrize("family", sorted(RANDOM_FAMILIES))
def test_complex_inputs_are_refused(family):
    with pytest.raises(TypeError, match="real floating-point inputs, got dtype torch.complex"):
        FAMILIES[family]()(torch.ones(2, 3, dtype=torch.complex128)).to_dense()


@pytest.mark.parametrize("family", sorted(RANDOM_FAMILIES))
def test_a_generator_argument_that_is_not_a_generator_names_the_fix(family):
    with pytest.raises(TypeError, match=r"generator must be a torch.Generator or None, got int; pass torch.Generator"):
        FAMILIES[family]().resample_features(5)


def test_one_dimensional_inputs_name_the_shape_needed():
    with pytest.raises(ValueError, match=r"got inputs of shape \(5, 1\); pass inputs of shape \(\.\.\., n, 3\)"):
        RandomFourierKernel(8, num_dims=3, seed=SEED)(torch.randn(5, dtype=torch.float64)).to_dense()


@pytest.mark.parametrize("batch", [(3,), (4, 3)])
def test_a_batch_shape_that_does_not_broadcast_is_named(batch):
    kernel = RandomFourierKernel(8, num_dims=3, seed=SEED, batch_shape=torch.Size([2]))
    with pytest.raises(ValueError, match=r"has batch_shape \(2,\), which does not broadcast"):
        kernel(torch.randn(*batch, 5, 3, dtype=torch.float64)).to_dense()


def test_a_broadcasting_batch_of_inputs_gives_one_matrix_per_pair(float64):
    kernel = RandomFourierKernel(8, num_dims=3, seed=SEED, batch_shape=torch.Size([2]))
    x = torch.randn(4, 1, 5, 3)
    covariance = kernel(x).to_dense()
    assert covariance.shape == (4, 2, 5, 5)
    torch.testing.assert_close(covariance[1, 0], kernel[0](x[1, 0]).to_dense())


def test_last_dim_is_batch_is_refused():
    with pytest.raises(NotImplementedError, match="last_dim_is_batch"):
        FAMILIES["fourier"]()(torch.randn(4, 3), last_dim_is_batch=True).to_dense()


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_no_rows_give_an_empty_covariance(family, float64):
    assert FAMILIES[family]()(torch.randn(0, 3)).to_dense().shape == (0, 0)


def test_integer_inputs_are_computed_in_the_kernels_dtype(float64):
    kernel = FAMILIES["fourier"]()
    x = torch.tensor([[1, 0, 2], [0, 1, 1]])
    torch.testing.assert_close(kernel(x).to_dense(), kernel(x.double()).to_dense())


def test_float32_inputs_to_a_float64_kernel_promote_to_float64(float64):
    kernel = FAMILIES["fourier"]()
    x = torch.randn(4, 3)
    assert kernel(x.float()).to_dense().dtype == torch.float64
    torch.testing.assert_close(kernel(x.float()).to_dense(), kernel(x.float().double()).to_dense())


# ------------------------------------------------------------------------------------------------ hyperparameters
@pytest.mark.parametrize("value", [-1.0, 0.0, math.nan])
def test_lengthscale_setter_refuses_non_positive_and_nan(value):
    kernel = FAMILIES["fourier"]()
    with pytest.raises(ValueError, match="lengthscale must be positive"):
        kernel.lengthscale = value


def test_a_huge_lengthscale_gives_the_constant_kernel_one(float64):
    kernel = FAMILIES["fourier"]()
    kernel.lengthscale = 1e30
    torch.testing.assert_close(kernel(torch.randn(6, 3)).to_dense(), torch.ones(6, 6), rtol=0, atol=1e-12)


def test_a_tiny_lengthscale_keeps_a_unit_diagonal_and_finite_values(float64):
    """cos^2 + sin^2 = 1 at any frequency: the diagonal of random Fourier features is exactly one."""
    kernel = FAMILIES["fourier"]()
    kernel.lengthscale = 1e-30
    covariance = kernel(torch.randn(6, 3)).to_dense()
    assert bool(covariance.isfinite().all())
    torch.testing.assert_close(covariance.diagonal(), torch.ones(6), rtol=0, atol=1e-12)


def test_an_outputscale_of_zero_gives_the_zero_covariance(float64):
    kernel = ScaleKernel(FAMILIES["fourier"]())
    kernel.outputscale = 0.0
    assert bool((kernel(torch.randn(5, 3)).to_dense() == 0).all())


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_covariances_are_symmetric_and_their_diagonal_is_diag(family, float64):
    kernel = FAMILIES[family]()
    x = torch.randn(7, 3)
    x = x / x.norm(dim=-1, keepdim=True)  # on the sphere: every family's domain
    dense = kernel(x).to_dense()
    torch.testing.assert_close(dense, dense.mT, rtol=0, atol=1e-12)
    torch.testing.assert_close(kernel(x, diag=True), dense.diagonal(), rtol=1e-12, atol=1e-12)


def test_the_spherical_kernel_refuses_points_off_the_sphere():
    with pytest.raises(ValueError, match="defined on the unit sphere"):
        SphericalPolynomialKernel(2.0, 2)(2 * torch.eye(3)).to_dense()


def test_the_spherical_kernel_keeps_its_batch_shape_when_indexed():
    kernel = SphericalPolynomialKernel(2.0, 2, batch_shape=torch.Size([3, 2]))
    x = torch.eye(3)
    assert kernel(x).to_dense().shape == (3, 2, 3, 3)
    assert kernel[1].batch_shape == (2,) and kernel[1, 0].batch_shape == ()
    torch.testing.assert_close(kernel[1, 0](x).to_dense(), kernel(x).to_dense()[1, 0])


def test_active_dims_beyond_the_inputs_fail_in_gpytorchs_column_selection_as_documented():
    kernel = RandomFourierKernel(8, num_dims=2, active_dims=[0, 5], seed=SEED)
    with pytest.raises(RuntimeError, match="out of DATA bounds|out of range|index"):
        kernel(torch.randn(4, 3)).to_dense()


@pytest.mark.parametrize("where", ["inputs", "kernel"])
def test_inputs_on_another_device_than_the_kernel_name_both(where):
    """(The meta device stands in for a GPU.)"""
    kernel = FAMILIES["fourier"]()
    x = torch.randn(3, 3)
    if where == "inputs":
        x = x.to("meta")
    else:
        kernel = kernel.to("meta")
    with pytest.raises(
        ValueError, match=r"is on device (cpu|meta) but got inputs on (meta|cpu); move one to the other"
    ):
        kernel(x).to_dense()
