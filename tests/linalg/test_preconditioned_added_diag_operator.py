"""PreconditionedAddedDiagLinearOperator: the preconditioner linear_operator receives is the random-feature model's
covariance (solve, log-determinant, operator), built once per evaluation; conjugate gradients with it need fewer
iterations than with GPyTorch's pivoted Cholesky or none; the CG/SLQ marginal-likelihood terms match the dense ones
(exactly when the features are an exact root, within the SLQ standard deviation otherwise); noise updates."""

from __future__ import annotations

import gpytorch
import torch
from gpytorch.kernels import LinearKernel, RBFKernel, ScaleKernel
from linear_operator import to_linear_operator
from linear_operator.operators import AddedDiagLinearOperator, DiagLinearOperator

from gprf.kernels import PreconditionedKernel
from gprf.linalg import (
    ExactKernelLinearOperator,
    FeatureRoot,
    FeatureRootPreconditioner,
    PreconditionedAddedDiagLinearOperator,
    cg_iterations,
    feature_root,
)
from tests.helpers.slq import seeded_slq, slq_logdet_sd

NOISE = 0.01


def rbf(lengthscale=0.6, outputscale=1.3):
    kernel = ScaleKernel(RBFKernel(ard_num_dims=2)).double()
    kernel.outputscale = outputscale
    kernel.base_kernel.lengthscale = lengthscale
    return kernel


def inputs(num_points=120, seed=0):
    return torch.rand(num_points, 2, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 3


def training_covariance(kernel, x, num_features=64, noise=NOISE) -> PreconditionedAddedDiagLinearOperator:
    wrapped = PreconditionedKernel(kernel, num_features, seed=0, num_dims=x.size(-1))
    return wrapped(x).evaluate_kernel().add_diagonal(torch.tensor(noise, dtype=x.dtype))


def dense_preconditioner(covariance) -> torch.Tensor:
    kernel = covariance._linear_op
    root = feature_root(kernel.preconditioner_covariance(kernel.x1)).scaled_features()
    return root @ root.mT + NOISE * torch.eye(root.size(-2), dtype=root.dtype)


def test_linear_operator_receives_the_random_feature_covariance():
    covariance = training_covariance(rbf(), inputs())
    solve, operator, logdet = covariance._preconditioner()
    dense = dense_preconditioner(covariance)
    rhs = torch.randn(120, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    torch.testing.assert_close(solve(rhs), torch.linalg.solve(dense, rhs))
    torch.testing.assert_close(operator.to_dense(), dense)
    torch.testing.assert_close(logdet, torch.logdet(dense))


class Counting:
    def __init__(self, function):
        self.function = function
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return self.function(x)


def test_the_preconditioner_is_built_once_per_evaluation():
    covariance = training_covariance(rbf(), inputs())
    kernel = covariance._linear_op
    counting = Counting(kernel.preconditioner_covariance)
    counted = ExactKernelLinearOperator(
        kernel.x1,
        kernel.x2,
        kernel.covar_func,
        num_nonbatch_dimensions=kernel.num_nonbatch_dimensions,
        preconditioner_covariance=counting,
        **kernel.tensor_params,
    ).add_diagonal(torch.tensor(NOISE, dtype=torch.float64))
    rhs = torch.ones(120, 1, dtype=torch.float64)
    with gpytorch.settings.max_cholesky_size(0):
        counted.solve(rhs)  # rebuilt by linear_operator, preconditioner from a detached copy
        counted.inv_quad_logdet(rhs, logdet=True)
        counted.detach()._solve_preconditioner()
    assert counting.calls == 1
    assert counted.evaluate_kernel() is counted
    # new noise: a new covariance, a new preconditioner
    renoised = counted.add_diagonal(torch.tensor(0.5, dtype=torch.float64))
    assert isinstance(renoised, PreconditionedAddedDiagLinearOperator)
    renoised._preconditioner()
    assert counting.calls == 2
    torch.testing.assert_close(renoised.diagonal(), counted.diagonal() + 0.5)


def test_adding_a_diagonal_or_another_matrix():
    covariance = training_covariance(rbf(), inputs())
    added = covariance + DiagLinearOperator(torch.full((120,), 0.2, dtype=torch.float64))
    assert isinstance(added, PreconditionedAddedDiagLinearOperator)
    torch.testing.assert_close(added.diagonal(), covariance.diagonal() + 0.2)
    dense = to_linear_operator(torch.eye(120, dtype=torch.float64))
    other = covariance + dense
    assert type(other) is AddedDiagLinearOperator  # not the kernel the features approximate any more
    torch.testing.assert_close(other.diagonal(), covariance.diagonal() + 1)


def test_preconditioned_cg_needs_fewer_iterations_than_pivoted_cholesky_and_none():
    # Lengthscale 0.6 on [0, 3]^2, noise 0.01, 800 points: well within what 256 random features capture.
    x = inputs(800)
    kernel = rbf()
    covariance = training_covariance(kernel, x, num_features=256)
    with torch.no_grad():
        dense = kernel(x).to_dense() + NOISE * torch.eye(800, dtype=torch.float64)
        pivoted = to_linear_operator(kernel(x).to_dense()).pivoted_cholesky(rank=15)
    pivoted_cholesky = FeatureRootPreconditioner.from_root(FeatureRoot(pivoted, noise=torch.tensor([NOISE]))).solve
    rhs = torch.randn(800, 1, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    tolerance = gpytorch.settings.eval_cg_tolerance.value()
    counts = {
        name: cg_iterations(dense.matmul, rhs, solve, (tolerance,))[tolerance]
        for name, solve in {
            "none": None,
            "pivoted": pivoted_cholesky,
            "features": covariance.preconditioner.detached().solve,
        }.items()
    }
    assert counts["features"] < counts["pivoted"] < counts["none"], counts


def test_with_an_exact_root_cg_and_slq_are_exact():
    # A linear kernel's random-feature root is exact, so P is the covariance itself: log det(P^-1/2 K P^-1/2) = 0
    # whatever the probes, and the variance-reduced gradient of the log-determinant has no variance.
    x = inputs(150)
    kernel = ScaleKernel(LinearKernel()).double()
    kernel.outputscale = 0.8
    y = torch.randn(150, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    covariance = training_covariance(kernel, x)
    with torch.no_grad():
        dense = kernel(x).to_dense() + NOISE * torch.eye(150, dtype=torch.float64)
    params = [kernel.raw_outputscale, kernel.base_kernel.raw_variance]
    with gpytorch.settings.max_cholesky_size(0), gpytorch.settings.cg_tolerance(1e-6):
        inv_quad, logdet = covariance.inv_quad_logdet(y.unsqueeze(-1), logdet=True)
        grads = torch.autograd.grad(inv_quad + logdet, params)
    dense_terms = y @ torch.linalg.solve(dense, y) + torch.logdet(dense)
    torch.testing.assert_close(inv_quad + logdet, dense_terms, rtol=1e-8, atol=1e-6)
    dense_value = lambda: (  # noqa: E731
        lambda k: y @ torch.linalg.solve(k, y) + torch.logdet(k)
    )(kernel(x).to_dense() + NOISE * torch.eye(150, dtype=torch.float64))
    expected = torch.autograd.grad(dense_value(), params)
    for grad, reference in zip(grads, expected, strict=True):
        torch.testing.assert_close(grad, reference, rtol=1e-5, atol=1e-6)


def test_slq_log_determinant_lies_within_its_standard_deviation():
    num_points, num_probes = 120, 50
    x = inputs(num_points)
    kernel = rbf()
    covariance = training_covariance(kernel, x, num_features=32)
    with torch.no_grad():
        dense = kernel(x).to_dense() + NOISE * torch.eye(num_points, dtype=torch.float64)
        sd = slq_logdet_sd(dense, dense_preconditioner(covariance), num_probes)
    with seeded_slq(num_probes, num_points):
        _, logdet = covariance.inv_quad_logdet(logdet=True)
    assert abs(logdet.item() - torch.logdet(dense).item()) <= 4 * sd, (logdet.item(), torch.logdet(dense).item(), sd)
    assert sd > 0.1  # the bound is not vacuous: the features miss part of the spectrum
