"""cholesky_inv_quad_logdet: the values and gradients of linear_operator's Cholesky route (batches, vector and
several right-hand sides, reduced or not), gradcheck of the closed-form backward pass, the terms not asked for, bad
shapes, a matrix that needs jitter; and the training covariance of a PreconditionedKernel takes it at or below
max_cholesky_size with the marginal likelihood and gradients of GPyTorch's exact kernel."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from linear_operator import settings as linop_settings
from linear_operator import to_linear_operator
from linear_operator.utils.errors import NotPSDError
from linear_operator.utils.warnings import NumericalWarning

import gprf.linalg.preconditioned_added_diag_operator as operator_module
from gprf.kernels import PreconditionedKernel
from gprf.linalg.cholesky_terms import cholesky_inv_quad_logdet

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")),
]


def spd(batch=(), n=7, seed=0, device="cpu"):
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(*batch, n, n, generator=generator, dtype=torch.float64)
    return (a @ a.mT / n + 0.5 * torch.eye(n, dtype=torch.float64)).to(device)


def rhs(batch=(), n=7, m=3, seed=1, device="cpu"):
    return torch.randn(*batch, n, m, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch", [(), (2,), (2, 3)])
@pytest.mark.parametrize("reduce_inv_quad", [True, False])
def test_values_and_gradients_equal_linear_operators_cholesky_route(device, batch, reduce_inv_quad):
    matrix, right = spd(batch, device=device), rhs(batch, device=device)
    ours_matrix, ours_rhs = matrix.clone().requires_grad_(), right.clone().requires_grad_()
    theirs_matrix, theirs_rhs = matrix.clone().requires_grad_(), right.clone().requires_grad_()
    inv_quad, logdet = cholesky_inv_quad_logdet(ours_matrix, ours_rhs, True, reduce_inv_quad)
    with gpytorch.settings.max_cholesky_size(100):
        expected = to_linear_operator(theirs_matrix).inv_quad_logdet(theirs_rhs, True, reduce_inv_quad)
    torch.testing.assert_close(inv_quad, expected[0])
    torch.testing.assert_close(logdet, expected[1])
    torch.testing.assert_close(logdet, torch.logdet(matrix))
    weights = torch.linspace(0.5, 1.5, inv_quad.numel(), dtype=torch.float64, device=device).view_as(inv_quad)
    ((weights * inv_quad).sum() + 0.7 * logdet.sum()).backward()
    ((weights * expected[0]).sum() + 0.7 * expected[1].sum()).backward()
    torch.testing.assert_close(ours_matrix.grad, theirs_matrix.grad)
    torch.testing.assert_close(ours_rhs.grad, theirs_rhs.grad)


def test_gradcheck_of_the_closed_form_backward():
    matrix, right = spd((2,), n=5).requires_grad_(), rhs((2,), n=5, m=2).requires_grad_()

    def terms(a, r):
        symmetric = (a + a.mT) / 2  # gradcheck perturbs single entries; the function is one of symmetric matrices
        return cholesky_inv_quad_logdet(symmetric, r, True, False)

    assert torch.autograd.gradcheck(terms, (matrix, right))


def test_a_vector_right_hand_side_and_the_terms_not_asked_for():
    matrix, vector = spd(), rhs(m=1)[:, 0]
    inv_quad, logdet = cholesky_inv_quad_logdet(matrix, vector)
    torch.testing.assert_close(inv_quad, vector @ torch.linalg.solve(matrix, vector))
    assert logdet is None
    inv_quad, logdet = cholesky_inv_quad_logdet(matrix, None, logdet=True)
    assert inv_quad is None
    torch.testing.assert_close(logdet, torch.logdet(matrix))


def test_only_the_log_determinant_has_the_inverse_as_gradient():
    matrix = spd().requires_grad_()
    _, logdet = cholesky_inv_quad_logdet(matrix, None, logdet=True)
    logdet.backward()
    torch.testing.assert_close(matrix.grad, torch.linalg.inv(matrix.detach()))


def test_bad_calls_are_refused():
    with pytest.raises(RuntimeError, match="inv_quad_rhs or `logdet`|Either"):
        cholesky_inv_quad_logdet(spd(), None, logdet=False)
    with pytest.raises(RuntimeError, match=r"inv_quad_rhs of shape \(6, 3\).*\(\*batch, N, M\)"):
        cholesky_inv_quad_logdet(spd(), rhs(n=6))
    with pytest.raises(NotPSDError), pytest.warns(NumericalWarning, match="jitter"):
        cholesky_inv_quad_logdet(-spd(), rhs(), logdet=True)


def test_a_singular_matrix_is_factored_with_jitter():
    vectors = torch.randn(7, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    singular = vectors @ vectors.mT  # rank 2
    with pytest.warns(NumericalWarning, match="added jitter"):
        inv_quad, logdet = cholesky_inv_quad_logdet(singular, vectors[:, :1], logdet=True)
    assert torch.isfinite(inv_quad) and torch.isfinite(logdet)
    assert logdet < torch.logdet(singular + 1e-4 * torch.eye(7, dtype=torch.float64))


def test_a_preconditioned_kernels_marginal_likelihood_at_cholesky_sizes_equals_the_exact_kernels(monkeypatch):
    calls = []

    def counted(*args):
        calls.append(args[0].shape)
        return cholesky_inv_quad_logdet(*args)

    monkeypatch.setattr(operator_module, "cholesky_inv_quad_logdet", counted)
    x = torch.rand(60, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = torch.sin(4 * x).sum(-1)
    values = {}
    for name in ("exact", "preconditioned"):
        kernel = ScaleKernel(RBFKernel(ard_num_dims=2)).double()
        kernel.base_kernel.lengthscale = torch.tensor([0.3, 0.5])
        covar = kernel if name == "exact" else PreconditionedKernel(kernel, 16, seed=0)
        likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
        likelihood.noise = 0.05
        covariance = likelihood(gpytorch.distributions.MultivariateNormal(torch.zeros_like(y), covar(x)))
        with linop_settings.fast_computations(log_prob=True):
            loss = -covariance.log_prob(y)
        loss.backward()
        values[name] = (loss.detach(), kernel.raw_outputscale.grad, kernel.base_kernel.raw_lengthscale.grad)
    assert calls == [torch.Size([60, 60])]
    for ours, theirs in zip(values["preconditioned"], values["exact"], strict=True):
        torch.testing.assert_close(ours, theirs)


def test_without_the_log_determinant_the_gradient_is_the_inverse_quadratic_terms_alone():
    matrix, right = spd().requires_grad_(), rhs()
    inv_quad, _ = cholesky_inv_quad_logdet(matrix, right, logdet=False)
    inv_quad.backward()
    solution = torch.linalg.solve(matrix.detach(), right)
    torch.testing.assert_close(matrix.grad, -(solution @ solution.mT))
