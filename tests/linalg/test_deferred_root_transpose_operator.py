"""DeferredRootTransposeLinearOperator: the cross covariance of a feature kernel equals R1 R2^T with R2 formed only when
read, gradients reach the inputs and the kernel's lengthscale through it, and batched predictions never featurise the
training rows."""

from __future__ import annotations

from unittest import mock

import gpytorch
import torch
from linear_operator.operators import MatmulLinearOperator

from gprf.kernels import RandomFourierKernel
from gprf.linalg.deferred_root_transpose_operator import DeferredRootTransposeLinearOperator
from tests.prediction.conftest import ExactModel


def _kernel() -> RandomFourierKernel:
    kernel = RandomFourierKernel(32, num_dims=3, ard_num_dims=3, seed=0).double()
    kernel.lengthscale = torch.tensor([[0.7, 1.1, 0.9]], dtype=torch.float64)
    return kernel


def _inputs(seed: int, *shape: int) -> torch.Tensor:
    return torch.rand(*shape, 3, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_cross_covariance_is_the_product_of_the_roots_and_is_formed_only_when_read():
    kernel, x1, x2 = _kernel(), _inputs(0, 2, 5), _inputs(1, 2, 40)
    expected = kernel.features(x1) @ kernel.features(x2).mT
    with mock.patch.object(kernel, "features", wraps=kernel.features) as features:
        cross = kernel(x1, x2).evaluate_kernel()
        rows = sum(call.args[0].size(-2) for call in features.call_args_list)
    assert isinstance(cross, MatmulLinearOperator)
    assert isinstance(cross.right_linear_op, DeferredRootTransposeLinearOperator)
    assert rows == 5 + 1  # x1 and one row of x2 (for the root's shape)
    torch.testing.assert_close(cross.to_dense(), expected, rtol=1e-12, atol=1e-12)
    rhs = torch.randn(2, 40, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(cross @ rhs, expected @ rhs, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(cross.mT @ torch.ones(2, 5, 1, dtype=torch.float64), expected.mT.sum(-1, keepdim=True))
    torch.testing.assert_close(cross[1, 2:4, 7:9].to_dense(), expected[1, 2:4, 7:9])
    torch.testing.assert_close(cross.expand(3, 2, 5, 40).to_dense(), expected.expand(3, 2, 5, 40))


def test_gradients_through_the_deferred_root_reach_inputs_and_lengthscale():
    kernel = _kernel()
    x1, x2 = _inputs(0, 4), _inputs(1, 30).requires_grad_(True)
    rhs = torch.randn(30, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    deferred = (kernel(x1, x2).evaluate_kernel() @ rhs).square().sum()
    grads = torch.autograd.grad(deferred, [x2, kernel.raw_lengthscale])
    eager = ((kernel.features(x1) @ kernel.features(x2).mT) @ rhs).square().sum()
    expected = torch.autograd.grad(eager, [x2, kernel.raw_lengthscale])
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_batched_predictions_do_not_featurise_the_training_rows():
    x, test_x = _inputs(0, 200), _inputs(1, 16, 4)
    model = ExactModel(x, torch.sin(4 * x).sum(-1), gpytorch.likelihoods.GaussianLikelihood(), _kernel()).double()
    model.eval()
    with torch.no_grad():
        model(test_x[0])  # builds the caches from the 200 training rows
        kernel = model.covar_module
        with mock.patch.object(kernel, "features", wraps=kernel.features) as features:
            output = model(test_x)
            rows = sum(call.args[0][..., 0].numel() for call in features.call_args_list)
    assert output.mean.shape == (16, 4)
    assert rows < 200  # the 16 x 4 test rows and one training row per batch, never the 16 x 200 training rows
