"""LinearFeatureKernel: GPyTorch's BaseKernelTestCase, its exact root equals GPyTorch's LinearKernel with the tied
variance (ARD too), it joins sums as d root columns, and its construction errors."""

from __future__ import annotations

import unittest

import pytest
import torch
from gpytorch.kernels import LinearKernel
from gpytorch.priors import GammaPrior

from gprf.kernels import LinearFeatureKernel, RandomFourierKernel
from gprf.testing import DEVICES, FeatureKernelTestCase, num_dims_of


class TestLinearFeatureKernel(FeatureKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return LinearFeatureKernel(num_dims_of(kwargs, 2), **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return LinearFeatureKernel(num_dims, ard_num_dims=num_dims, **kwargs)


def _x(n: int = 7, d: int = 3, seed: int = 0) -> torch.Tensor:
    return torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("ard_num_dims", [None, 3])
def test_root_is_exact_and_tied_to_gpytorchs_linear_kernel(ard_num_dims):
    kernel = LinearFeatureKernel(3, ard_num_dims=ard_num_dims, variance_prior=GammaPrior(2.0, 1.0)).double()
    kernel.variance = torch.tensor([0.5, 1.5, 2.0][: ard_num_dims or 1], dtype=torch.float64)
    exact = kernel.exact()
    assert isinstance(exact, LinearKernel) and exact.raw_variance is kernel.raw_variance
    x, y = _x(), _x(4, seed=1)
    torch.testing.assert_close(kernel(x, y).to_dense(), exact(x, y).to_dense())
    torch.testing.assert_close(kernel(x).to_dense(), exact(x).to_dense())
    torch.testing.assert_close(kernel(x, diag=True), exact(x, diag=True))
    assert kernel.root_dim == 3 and kernel.features(x).shape == (7, 3)
    kernel(x).to_dense().sum().backward()
    assert kernel.raw_variance.grad is not None
    assert [name for name, *_ in kernel.named_priors()] == ["variance_prior"]


@pytest.mark.parametrize("device", DEVICES)
def test_sum_with_random_features_adds_d_columns(device):
    total = (RandomFourierKernel(8, num_dims=3, seed=0) + LinearFeatureKernel(3)).to(device)
    x = _x().float().to(device)
    assert total.root_dim == 11 and total.features(x).shape == (7, 11)
    assert total(x).to_dense().dtype == torch.float32


def test_batches_and_errors():
    kernel = LinearFeatureKernel(3, batch_shape=torch.Size([2])).double()
    kernel.variance = torch.tensor([[[1.0]], [[2.0]]], dtype=torch.float64)
    covariance = kernel(_x()).to_dense()
    torch.testing.assert_close(covariance[1], 2 * covariance[0])
    with pytest.raises(ValueError, match="num_dims=d"):
        LinearFeatureKernel()
    with pytest.raises(ValueError, match="num_dims=4"):
        LinearFeatureKernel(3)(_x(d=4)).to_dense()


def test_contract_without_draws_state_dict_pickle_and_batch_indexing():
    """The feature-kernel contract of tests/kernels/test_feature_kernel.py that applies to a root without draws."""
    import copy
    import pickle

    from gprf.features.versions import feature_versions
    from gprf.linalg import FeatureRootLinearOperator, feature_root

    kernel = LinearFeatureKernel(3, ard_num_dims=3, batch_shape=torch.Size([2])).double()
    kernel.variance = torch.tensor([[[0.5, 1.0, 2.0]], [[1.5, 0.2, 0.7]]], dtype=torch.float64)
    x = _x()
    covariance = kernel(x).evaluate_kernel()
    assert isinstance(covariance, FeatureRootLinearOperator) and feature_versions(kernel) == ()
    torch.testing.assert_close(feature_root(covariance).features, kernel.features(x), rtol=0, atol=0)
    fresh = LinearFeatureKernel(3, ard_num_dims=3, batch_shape=torch.Size([2])).double()
    fresh.load_state_dict(kernel.state_dict())
    for clone in (fresh, pickle.loads(pickle.dumps(kernel)), copy.deepcopy(kernel)):
        torch.testing.assert_close(clone(x).to_dense(), covariance.to_dense(), rtol=0, atol=0)
    torch.testing.assert_close(kernel[1](x).to_dense(), covariance.to_dense()[1])
