"""gprf.kernels.signed_feature_kernel: kernels given by two real roots, K = AA^T - BB^T — evaluations to a signed
root (never N x N), the signature, the posterior-mean-only prediction strategy, and refused sums. (The contract every
signed kernel class keeps is checked with the feature kernels', in tests/kernels/test_feature_kernel.py.)"""

from __future__ import annotations

import pytest
import torch

from gprf.kernels import FeatureKernel, SignedFeatureKernel
from gprf.linalg import SignedRootLinearOperator
from gprf.prediction import SignedPredictionStrategy
from gprf.testing import regression_data
from tests.helpers.regression import signed_kernel, signed_model


def test_evaluation_is_the_signed_root():
    x, _ = regression_data(30)
    kernel = signed_kernel().base_kernel
    a, b = kernel.signed_features(x)
    covar = kernel(x).evaluate_kernel()
    assert isinstance(covar, SignedRootLinearOperator)
    torch.testing.assert_close(covar.to_dense(), a @ a.mT - b @ b.mT)
    torch.testing.assert_close(kernel(x, x[:5]).to_dense(), a @ a[:5].mT - b @ b[:5].mT)
    torch.testing.assert_close(kernel(x, diag=True), torch.full((30,), 1.0, dtype=torch.float64))
    # A sibling of the real-root kernels, not a restriction of one: no real root to ask for.
    assert isinstance(kernel, SignedFeatureKernel) and not isinstance(kernel, FeatureKernel)
    assert not hasattr(kernel, "features") and kernel.root_dim == 2 * kernel.num_features == a.size(-1)


def test_signature_is_ones_then_minus_ones_like_the_roots():
    kernel = signed_kernel().base_kernel
    like = torch.zeros(2, dtype=torch.float32)
    signature = kernel.signature(like)
    assert signature.dtype == torch.float32 and signature.shape == (2 * kernel.root_dim,)
    expected = torch.cat([torch.ones(kernel.root_dim), -torch.ones(kernel.root_dim)])
    torch.testing.assert_close(signature, expected, rtol=0, atol=0)
    torch.testing.assert_close(signature.double(), kernel.feature_map.signature(torch.float64), rtol=0, atol=0)


def test_prediction_uses_the_signed_strategy():
    x, y = regression_data(20)
    model = signed_model(x, y, signed_kernel()).eval()
    model(x[:3])
    assert type(model.prediction_strategy) is SignedPredictionStrategy


def test_sums_and_last_dim_is_batch_are_refused():
    kernel = signed_kernel().base_kernel
    with pytest.raises(TypeError, match="one spectrum"):
        kernel + kernel
    x, _ = regression_data(5)
    with pytest.raises(NotImplementedError, match="last_dim_is_batch"):
        kernel.forward(x, x, last_dim_is_batch=True)
