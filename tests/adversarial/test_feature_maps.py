"""Adversarial use of the feature maps of :mod:`gprf.features` and of the expression helpers and translation registry
around them: bad sizes, batch shapes, generators, spectra and inputs."""

from __future__ import annotations

import math

import pytest
import torch
from gpytorch.kernels import RBFKernel

from gprf.conversion import register_translation
from gprf.features import (
    MaclaurinFeatures,
    RandomFourierFeatures,
    delta_gaussian_spectrum,
    spherical_polynomial_spectrum,
    stationary_spectrum,
)
from gprf.kernels import exact_expression, root_columns


@pytest.mark.parametrize(
    ("build", "error", "match"),
    [
        (lambda: RandomFourierFeatures(0, 8), ValueError, "input_dim must be a positive integer, got 0"),
        (lambda: RandomFourierFeatures(2, 8, batch_shape=(-1,)), ValueError, r"batch_shape must hold positive sizes"),
        (lambda: RandomFourierFeatures(2, 8, batch_shape=(0,)), ValueError, r"positive sizes, got \(0,\)"),
        (lambda: RandomFourierFeatures(2, 8, seed="1"), TypeError, "seed must be an int or None"),
        (lambda: MaclaurinFeatures(2, 8, kernel="polynomial", degree=-1), ValueError, "degree must be a positive"),
        (lambda: delta_gaussian_spectrum([1.0], [1.0, 2.0]), ValueError, "non-empty and of equal length, got 1 and 2"),
        (lambda: delta_gaussian_spectrum([], []), ValueError, "non-empty"),
        (lambda: delta_gaussian_spectrum([1.0], [-1.0]), ValueError, "lengthscales must be positive"),
        (lambda: delta_gaussian_spectrum([math.nan], [1.0]), ValueError, "must be finite"),
        (lambda: stationary_spectrum("foo"), ValueError, "Unknown kernel 'foo'"),
    ],
)
def test_bad_map_arguments_are_refused_naming_them(build, error, match):
    with pytest.raises(error, match=match):
        build()


def test_spherical_spectrum_needs_its_input_dimension():
    with pytest.raises(TypeError, match="input_dim"):
        spherical_polynomial_spectrum(2.0, 2)


@pytest.mark.parametrize(
    ("x", "error", "match"),
    [
        (torch.ones(2), ValueError, r"expects inputs of shape \(\.\.\., n, 2\), got shape \(2,\)"),
        ([[1.0, 2.0]], TypeError, "expects a torch.Tensor input, got list"),
        (torch.ones(3, 4), ValueError, "built for input dimension 2 but got inputs with 4 columns"),
        (torch.ones(3, 2, dtype=torch.long), TypeError, "real floating-point inputs"),
    ],
)
def test_bad_map_inputs_are_refused(x, error, match):
    with pytest.raises(error, match=match):
        RandomFourierFeatures(2, 8, seed=0)(x)


@pytest.mark.parametrize("method", ["resample", "resized"])
def test_generators_that_are_not_generators_are_refused(method):
    feature_map = RandomFourierFeatures(2, 8, seed=0)
    call = feature_map.resample if method == "resample" else lambda g: feature_map.resized(16, g)
    with pytest.raises(TypeError, match=r"generator must be a torch.Generator or None, got int"):
        call(3)


def test_resizing_to_zero_features_is_refused():
    with pytest.raises(ValueError, match="num_features must be a positive integer, got 0"):
        RandomFourierFeatures(2, 8, seed=0).resized(0)


def test_a_resized_map_is_a_prefix_and_growing_back_restores_the_draws():
    feature_map = RandomFourierFeatures(2, 16, seed=0, sampler="iid")
    x = torch.randn(5, 2, dtype=torch.float64)
    grown_back = feature_map.resized(8).resized(16)
    torch.testing.assert_close(grown_back(x.float()), feature_map(x.float()), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: exact_expression(5), TypeError, "exact_expression takes a GPyTorch Kernel, got int"),
        (lambda: root_columns(RBFKernel()), TypeError, "RBFKernel does not evaluate to a feature root"),
        (lambda: register_translation(5), TypeError, r"takes kernel classes .* got int 5"),
    ],
)
def test_expression_helpers_refuse_what_they_cannot_read(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_the_exact_expression_of_an_exact_kernel_is_itself():
    kernel = RBFKernel()
    assert exact_expression(kernel) is kernel
