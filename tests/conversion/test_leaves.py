"""gprf.conversion.leaves: RBF/Matérn to random Fourier features with the call's sampler, linear to its exact root,
polynomial to the offset sketch with the call's sketch, task kernels to their exact root, gprf kernels kept; and the
errors of parts that cannot be translated."""

from __future__ import annotations

import pytest
import torch
from gpytorch.kernels import IndexKernel, LinearKernel, MaternKernel, PolynomialKernel, RBFKernel

import gprf
from gprf.kernels import RandomFourierKernel


@pytest.mark.parametrize(("nu", "name"), [(0.5, "matern12"), (1.5, "matern32"), (2.5, "matern52")])
def test_matern_kernels_and_the_sampler(nu, name):
    kernel = MaternKernel(nu=nu, ard_num_dims=3)
    approximation = gprf.random_features(kernel, 33, sampler="orthogonal", seed=0)
    assert approximation.feature_map.kernel == name and approximation.feature_map.sampler == "orthogonal"
    assert approximation.num_features == 32  # rounded down to cosine/sine pairs
    assert approximation.raw_lengthscale is kernel.raw_lengthscale


def test_linear_polynomial_index_and_feature_kernels():
    linear = LinearKernel(active_dims=[0, 2])
    assert gprf.random_features(linear, 8).raw_variance is linear.raw_variance
    polynomial = PolynomialKernel(power=3.0, active_dims=[0, 1])
    sketch = gprf.random_features(polynomial, 16, sketch="gaussian", seed=0)
    assert sketch.degree == 3 and sketch.feature_map.sketch == "gaussian" and sketch.raw_offset is polynomial.raw_offset
    task = IndexKernel(num_tasks=4, rank=2)
    assert gprf.random_features(task, 8).index_kernel is task
    already = RandomFourierKernel(16, num_dims=2, seed=0)
    assert gprf.random_features(already, 64) is already


def test_untranslatable_leaves():
    with pytest.raises(TypeError, match="PolynomialKernel with power=2.5 has no polynomial sketch"):
        gprf.random_features(PolynomialKernel(power=2.5), 16, num_dims=2)
    with pytest.raises(ValueError, match="gets 1 random Fourier feature.* needs at least 2"):
        gprf.random_features(RBFKernel(), 1, num_dims=2)
    x = torch.randn(3, 2)
    assert gprf.random_features(RBFKernel(), 2, num_dims=2)(x).to_dense().shape == (3, 3)
