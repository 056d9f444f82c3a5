"""ExactKernelLinearOperator: blockwise products, derivatives, diagonals, slices, batches and transposes against the
dense kernel matrix; blocks never larger than asked; the noise turns a training covariance (only) into the
preconditioned operator; and forming a large training covariance warns."""

from __future__ import annotations

import warnings

import gpytorch
import pytest
import torch
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel
from linear_operator.operators import AddedDiagLinearOperator

from gprf.exceptions import DenseCovarianceWarning
from gprf.kernels import PreconditionedKernel
from gprf.linalg import ExactKernelLinearOperator, PreconditionedAddedDiagLinearOperator


def base_kernel(batch_shape=torch.Size()):
    kernel = ScaleKernel(MaternKernel(nu=2.5, ard_num_dims=3, batch_shape=batch_shape), batch_shape=batch_shape)
    kernel = kernel.double()
    kernel.outputscale = torch.full(batch_shape, 1.4)
    kernel.base_kernel.lengthscale = torch.tensor([0.5, 0.8, 1.2], dtype=torch.float64).expand(*batch_shape, 1, 3)
    return kernel


def inputs(num_points=37, batch=(), seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(*batch, num_points, 3, generator=generator, dtype=torch.float64)


def operator(kernel, x1, x2=None, block_rows=5) -> ExactKernelLinearOperator:
    wrapped = PreconditionedKernel(kernel, 32, seed=0, block_rows=block_rows)
    with gpytorch.settings.lazily_evaluate_kernels(False):
        return wrapped(x1, x1 if x2 is None else x2)


@pytest.mark.parametrize("vector", [False, True])
def test_blockwise_products_equal_the_dense_matrix(vector):
    kernel, x1, x2 = base_kernel(), inputs(), inputs(23, seed=1)
    op = operator(kernel, x1, x2)
    rhs = torch.randn(23, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    rhs = rhs if vector else torch.stack([rhs, 2 * rhs], -1)
    with torch.no_grad():
        torch.testing.assert_close(op._matmul(rhs), kernel(x1, x2).to_dense() @ rhs)
        torch.testing.assert_close(
            op.mT._matmul(torch.ones(37, 2, dtype=torch.float64)),
            kernel(x2, x1) @ torch.ones(37, 2, dtype=torch.float64),
        )


def test_blocks_are_never_larger_than_block_rows():
    kernel, x = base_kernel(), inputs()
    op = operator(kernel, x, block_rows=8)
    seen = []
    evaluate = op.covar_func

    def spy(x1, x2, diag=False, **params):
        seen.append(x1.size(-2))
        return evaluate(x1, x2, diag=diag, **params)

    op.covar_func = spy
    with torch.no_grad():
        op._matmul(torch.ones(37, 1, dtype=torch.float64))
    assert seen == [8, 8, 8, 8, 5]


def test_a_matrix_within_one_block_is_evaluated_once():
    kernel, x = base_kernel(), inputs()
    op = operator(kernel, x, block_rows=100)
    with torch.no_grad():
        first = op._matmul(torch.ones(37, 1, dtype=torch.float64))
    op.covar_func = None  # a second product must not evaluate the kernel again
    with torch.no_grad():
        torch.testing.assert_close(op._matmul(torch.ones(37, 1, dtype=torch.float64)), first)


def test_bilinear_derivative_equals_autograd_of_the_dense_matrix():
    kernel = base_kernel()
    x1 = inputs().requires_grad_(True)
    x2 = inputs(23, seed=1)
    op = operator(kernel, x1, x2)
    generator = torch.Generator().manual_seed(3)
    left = torch.randn(37, 4, generator=generator, dtype=torch.float64)
    right = torch.randn(23, 4, generator=generator, dtype=torch.float64)
    grads = op._bilinear_derivative(left, right)
    representation = op.representation()
    dense_loss = (left * (kernel(x1, x2).to_dense() @ right)).sum()
    expected = torch.autograd.grad(dense_loss, [arg for arg in representation if arg.requires_grad])
    actual = [grad for grad, arg in zip(grads, representation, strict=True) if arg.requires_grad]
    assert len(actual) == 3  # x1, outputscale and lengthscale
    for grad, reference in zip(actual, expected, strict=True):
        torch.testing.assert_close(grad, reference)


def test_the_cpu_backward_pass_takes_cache_sized_blocks_and_the_same_derivative(monkeypatch):
    """On a CPU the backward pass evaluates blocks of at most CPU_BACKWARD_BLOCK_ENTRIES entries, however large
    ``block_rows`` (the matrix is kept whole for the products), with the derivative of the dense matrix."""
    from gprf.linalg import exact_kernel_operator

    monkeypatch.setattr(exact_kernel_operator, "CPU_BACKWARD_BLOCK_ENTRIES", 23 * 6)  # 6 rows of 23 columns
    kernel = base_kernel()
    x1, x2 = inputs().requires_grad_(True), inputs(23, seed=1)
    op = operator(kernel, x1, x2, block_rows=100)
    seen = []
    evaluate = ExactKernelLinearOperator._evaluate

    def spy(self, rows=None, diag=False):
        block = evaluate(self, rows, diag)
        seen.append(block.size(-2))
        return block

    monkeypatch.setattr(ExactKernelLinearOperator, "_evaluate", spy)
    generator = torch.Generator().manual_seed(3)
    left = torch.randn(37, 4, generator=generator, dtype=torch.float64)
    right = torch.randn(23, 4, generator=generator, dtype=torch.float64)
    grads = [grad for grad in op._bilinear_derivative(left, right) if grad is not None]
    assert seen == [6] * 6 + [1]
    dense_loss = (left * (kernel(x1, x2).to_dense() @ right)).sum()
    expected = torch.autograd.grad(dense_loss, [x1, kernel.raw_outputscale, kernel.base_kernel.raw_lengthscale])
    assert len(grads) == 3
    for grad, reference in zip(grads, expected, strict=True):
        torch.testing.assert_close(grad.reshape(reference.shape), reference)


def test_products_under_autograd_differentiate_blockwise():
    kernel, x = base_kernel(), inputs()
    op = operator(kernel, x)
    rhs = torch.randn(37, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    params = [kernel.raw_outputscale, kernel.base_kernel.raw_lengthscale]
    grads = torch.autograd.grad((op @ rhs).square().sum(), params)
    expected = torch.autograd.grad((kernel(x).to_dense() @ rhs).square().sum(), params)
    for grad, reference in zip(grads, expected, strict=True):
        torch.testing.assert_close(grad, reference)
    # a direct _matmul call under autograd goes through the same product
    direct = torch.autograd.grad(op._matmul(rhs).square().sum(), params)
    for grad, reference in zip(direct, expected, strict=True):
        torch.testing.assert_close(grad, reference)


def test_diagonal_slices_and_dense_evaluation():
    kernel, x = base_kernel(), inputs()
    op = operator(kernel, x)
    dense = kernel(x).to_dense()
    torch.testing.assert_close(op.diagonal(), dense.diagonal())
    torch.testing.assert_close(op.to_dense(), dense)
    torch.testing.assert_close(op[3:11, 5:30].to_dense(), dense[3:11, 5:30])
    rows = torch.tensor([0, 7, 2])
    torch.testing.assert_close(op[rows, rows], dense[rows, rows])


def test_batched_kernels_and_inputs():
    kernel = base_kernel(torch.Size([2]))
    kernel.outputscale = torch.tensor([0.7, 1.9])
    x = inputs(batch=(2,))
    op = operator(kernel, x)
    dense = kernel(x).to_dense()
    rhs = torch.randn(2, 37, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(op._matmul(rhs), dense @ rhs)
    torch.testing.assert_close(op[1].to_dense(), dense[1])
    torch.testing.assert_close(op.diagonal(), dense.diagonal(dim1=-2, dim2=-1))


def test_noise_makes_a_training_covariance_preconditioned():
    kernel, x = base_kernel(), inputs()
    training = operator(kernel, x)
    assert isinstance(
        training.add_diagonal(torch.tensor(0.1, dtype=torch.float64)), PreconditionedAddedDiagLinearOperator
    )
    noise = gpytorch.likelihoods.GaussianLikelihood().double()
    covariance = noise(gpytorch.distributions.MultivariateNormal(torch.zeros(37, dtype=torch.float64), training))
    assert isinstance(covariance.lazy_covariance_matrix, PreconditionedAddedDiagLinearOperator)
    cross = operator(kernel, x, inputs(37, seed=1))
    assert cross.preconditioner_covariance is None
    assert type(cross.add_diagonal(torch.tensor(0.1, dtype=torch.float64))) is AddedDiagLinearOperator
    # a slice of a training covariance is not one
    assert training[:10, :10].preconditioner_covariance is None


def test_detach_and_rebuilds_keep_the_training_covariance():
    kernel, x = base_kernel(), inputs()
    training = operator(kernel, x)
    assert training.detach().preconditioner_covariance is training.preconditioner_covariance
    rebuilt = training.representation_tree()(*training.representation())
    assert rebuilt.preconditioner_covariance is training.preconditioner_covariance
    assert rebuilt.block_rows == 5


def test_forming_a_large_training_covariance_warns():
    kernel, x = base_kernel(), inputs()
    op = operator(kernel, x)
    with gpytorch.settings.max_cholesky_size(10), pytest.warns(DenseCovarianceWarning, match="37 x 37"):
        op.to_dense()
    with gpytorch.settings.max_cholesky_size(100), warnings.catch_warnings():
        warnings.simplefilter("error", DenseCovarianceWarning)
        op.to_dense()
    with gpytorch.settings.max_cholesky_size(10), warnings.catch_warnings():
        warnings.simplefilter("error", DenseCovarianceWarning)
        operator(kernel, x, inputs(50, seed=2)).to_dense()  # cross-covariances are GPyTorch's to form


def test_composite_kernels_evaluate_exactly():
    x = inputs()
    composite = (ScaleKernel(RBFKernel(active_dims=[0, 1])) * MaternKernel(nu=1.5, active_dims=[2])).double()
    op = operator(composite, x)
    with torch.no_grad():
        rhs = torch.ones(37, 1, dtype=torch.float64)
        torch.testing.assert_close(op._matmul(rhs), composite(x).to_dense() @ rhs)
