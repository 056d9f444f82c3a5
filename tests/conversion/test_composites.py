"""gprf.conversion.composites: ScaleKernel with its active_dims, sums, products (joint-frequency features for two
Fourier factors, the exact Kronecker product with a task factor), additive structure with ScaleKernel wrappers, and
the errors of composites that cannot be translated."""

from __future__ import annotations

import warnings

import pytest
import torch
from gpytorch.kernels import AdditiveStructureKernel, IndexKernel, MaternKernel, RBFKernel, ScaleKernel

import gprf
from gprf.conversion.composites import is_exact
from gprf.kernels import AdditiveFeatureKernel, FeatureProductKernel, LinearFeatureKernel


def _structure(base, num_dims=4, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return AdditiveStructureKernel(base, num_dims=num_dims, **kwargs)


def test_scale_kernel_active_dims_give_the_base_its_dimension():
    kernel = ScaleKernel(RBFKernel(), active_dims=[1, 3])
    approximation = gprf.random_features(kernel, 16, num_dims=5, seed=0)
    assert approximation.base_kernel.feature_map.input_dim == 2
    assert approximation(torch.randn(4, 5)).to_dense().shape == (4, 4)


def test_products_choose_joint_features_or_the_exact_kronecker_product():
    product = gprf.random_features(RBFKernel(active_dims=[0]) * MaternKernel(active_dims=[1]), 32, seed=0)
    assert isinstance(product, FeatureProductKernel) and product.method == "joint" and product.root_dim == 32
    odd = gprf.random_features(RBFKernel(active_dims=[0]) * MaternKernel(active_dims=[1]), 33, seed=0)
    assert odd.method == "joint" and odd.root_dim == 32  # rounded down to cosine/sine pairs, not a permutation
    multitask = gprf.random_features(RBFKernel(active_dims=[0, 1]) * IndexKernel(3, rank=1, active_dims=[2]), 32)
    assert multitask.method == "kronecker" and multitask.root_dim == 32 * 4


def test_additive_structure_splits_features_per_dimension_and_keeps_scale_wrappers():
    kernel = _structure(ScaleKernel(ScaleKernel(MaternKernel(nu=0.5, ard_num_dims=4))))
    approximation = gprf.random_features(kernel, 70, seed=0)  # 70 / 4 = 17 -> 16 per dimension
    inner = approximation.base_kernel.base_kernel
    assert isinstance(inner, AdditiveFeatureKernel) and inner.feature_map.features_per_dim == 16
    assert inner.feature_map.kernel == "matern12"
    assert approximation.raw_outputscale is kernel.base_kernel.raw_outputscale


def test_is_exact():
    assert is_exact(ScaleKernel(IndexKernel(2)) * IndexKernel(3)) and not is_exact(RBFKernel() + IndexKernel(2))
    assert is_exact(LinearFeatureKernel(2))


def test_composite_errors():
    with pytest.raises(ValueError, match="num_features=6 for 4 one-dimensional components.*at least 8"):
        gprf.random_features(_structure(RBFKernel()), 6)
    with pytest.raises(ValueError, match="ard_num_dims=3 inside AdditiveStructureKernel"):
        gprf.random_features(_structure(RBFKernel(ard_num_dims=3)), 64)
    with pytest.raises(ValueError, match="has active_dims inside AdditiveStructureKernel"):
        gprf.random_features(_structure(RBFKernel(active_dims=[0, 1, 2, 3])), 64)
    with pytest.raises(ValueError, match="active_dims selecting 3 columns but num_dims=4"):
        gprf.random_features(_structure(RBFKernel(), active_dims=[0, 1, 2]), 64)
