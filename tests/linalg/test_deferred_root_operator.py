"""DeferredRootLinearOperator: the cross covariance of a feature kernel equals R1 R2^T with both roots formed only when
read (one row featurised for the shape, once per shape), gradients reach the inputs and the kernel's lengthscale
through either factor, batched predictions never featurise the training rows and featurise the test rows once, and
linear_operator's RectangularLinearOperatorTestCase in both orientations."""

from __future__ import annotations

import unittest
from unittest import mock

import gpytorch
import torch
from linear_operator.operators import MatmulLinearOperator, to_dense
from linear_operator.test.linear_operator_test_case import RectangularLinearOperatorTestCase

from gprf.kernels import RandomFourierKernel
from gprf.linalg.deferred_root_operator import DeferredRootLinearOperator
from gprf.testing import ExactGPModel


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
        again = kernel(_inputs(3, 2, 7), x2).evaluate_kernel()  # the same shapes but the number of rows
        rows_again = sum(call.args[0].size(-2) for call in features.call_args_list) - rows
    assert isinstance(cross, MatmulLinearOperator)
    assert isinstance(cross.left_linear_op, DeferredRootLinearOperator) and not cross.left_linear_op.transposed
    assert isinstance(cross.right_linear_op, DeferredRootLinearOperator) and cross.right_linear_op.transposed
    assert rows == 1  # one row, for the roots' shape
    assert rows_again == 0 and again.shape == (2, 7, 40)
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
    model = ExactGPModel(x, torch.sin(4 * x).sum(-1), gpytorch.likelihoods.GaussianLikelihood(), _kernel()).double()
    model.eval()
    with torch.no_grad():
        model(test_x[0])  # builds the caches from the 200 training rows
        kernel = model.covar_module
        counts = []
        for _ in range(2):
            with mock.patch.object(kernel, "features", wraps=kernel.features) as features:
                output = model(test_x)
                counts.append(sum(call.args[0][..., 0].numel() for call in features.call_args_list))
    assert output.mean.shape == (16, 4)
    # The test rows once (from the test-test block), never the 16 x 200 training rows; the first call with a new batch
    # shape also featurises one row per batch for the roots' shape.
    assert counts == [16 * 4 + 16, 16 * 4]


# ---------------------------------------------------------------------------------------- linear_operator's case
class TestDeferredRootTransposeOperatorCase(RectangularLinearOperatorTestCase, unittest.TestCase):
    """linear_operator's checks of rectangular operators on R^T = cos(X W)^T (F = 4 features of N = 5 points): the
    feature function reads no parameters, so the operator is a function of its representation (the inputs)."""

    seed = 0
    batch_shape = ()
    transposed = True

    def create_linear_op(self):
        self.weights = torch.randn(3, 4)
        return DeferredRootLinearOperator(
            torch.randn(*self.batch_shape, 5, 3),
            feature_fn=lambda x: torch.cos(x @ self.weights),
            batch_shape=torch.Size(self.batch_shape),
            num_features=4,
            transposed=self.transposed,
        )

    def evaluate_linear_op(self, linear_op):
        root = torch.cos(linear_op.inputs @ self.weights)
        return root.mT if self.transposed else root


class TestDeferredRootTransposeOperatorCaseBatch(TestDeferredRootTransposeOperatorCase):
    seed = 1
    batch_shape = (2, 3)


class TestDeferredRootOperatorCase(TestDeferredRootTransposeOperatorCase):
    """The same checks on R itself (N = 5 rows, F = 4 columns: the left factor of a cross covariance)."""

    seed = 3
    transposed = False


class TestDeferredRootOperatorCaseBatch(TestDeferredRootOperatorCase):
    seed = 4
    batch_shape = (2, 3)


class TestDeferredRootTransposeOfKernelCase(RectangularLinearOperatorTestCase, unittest.TestCase):
    """The same checks on the deferred root of a kernel (its ARD lengthscale a parameter the features read)."""

    seed = 2

    def create_linear_op(self):
        self.kernel = RandomFourierKernel(4, num_dims=3, ard_num_dims=3, seed=0)
        return self.kernel.deferred_root(torch.randn(2, 5, 3), transposed=True)

    def evaluate_linear_op(self, linear_op):
        return self.kernel.features(linear_op.inputs).mT

    def _test_matmul(self, rhs):
        """The kernel's parameters are the tensors its features read, not copies: the case's ``detach()`` copies of
        the representation are not what the operator differentiates, so instead of comparing the copies' gradients
        this checks the product and that gradients reach the inputs and the kernel's lengthscale as they do through the
        formed root."""
        self._check_gradients(lambda op: op @ rhs, lambda dense: dense @ rhs)

    def _test_rmatmul(self, lhs):
        """See :meth:`_test_matmul`."""
        self._check_gradients(lambda op: lhs @ op, lambda dense: lhs @ dense)

    def _check_gradients(self, product, reference):
        inputs = torch.randn(2, 5, 3, requires_grad=True)
        linear_op = self.kernel.deferred_root(inputs, transposed=True)
        result = to_dense(product(linear_op))
        grads = torch.autograd.grad(result.square().sum(), (inputs, self.kernel.raw_lengthscale))
        expected = reference(self.evaluate_linear_op(linear_op))
        expected_grads = torch.autograd.grad(expected.square().sum(), (inputs, self.kernel.raw_lengthscale))
        self.assertAllClose(result, expected)
        for grad, expected_grad in zip(grads, expected_grads, strict=True):
            self.assertAllClose(grad, expected_grad, **self.tolerances["matmul"])
