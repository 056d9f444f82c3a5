"""FeatureRootPreconditioner: P = Sigma + s Phi Phi^T against the dense matrix (solve, log-determinant, operator and its
probe vectors), homoscedastic, heteroscedastic and batched, float32 roots, gradients, and the missing-noise error."""

from __future__ import annotations

import math

import pytest
import torch

from gprf.linalg import FeatureRoot, FeatureRootPreconditioner


def dense_preconditioner(root: FeatureRoot) -> torch.Tensor:
    features = root.features.double()
    scale = 1.0 if root.outputscale is None else root.outputscale.double().unsqueeze(-1).unsqueeze(-1)
    noise = root.noise.double().expand(*features.shape[:-1])
    return scale * features @ features.mT + torch.diag_embed(noise)


def make_root(batch=(), heteroscedastic=False, dtype=torch.float64, num_points=40, num_features=12):
    generator = torch.Generator().manual_seed(3)
    features = torch.randn(*batch, num_points, num_features, generator=generator, dtype=dtype)
    outputscale = torch.rand(tuple(batch), generator=generator, dtype=dtype) + 0.5
    if heteroscedastic:
        noise = torch.rand(*batch, num_points, generator=generator, dtype=dtype) * 0.2 + 0.01
    else:
        noise = torch.full((*batch, 1), 0.05, dtype=dtype)
    return FeatureRoot(features, outputscale, noise)


CASES = {
    "homoscedastic": {},
    "heteroscedastic": {"heteroscedastic": True},
    "batched": {"batch": (2,), "heteroscedastic": True},
}


@pytest.mark.parametrize("case", CASES)
def test_solve_equals_the_dense_solve(case):
    root = make_root(**CASES[case])
    rhs = torch.randn(*root.features.shape[:-1], 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    solved = FeatureRootPreconditioner.from_root(root).solve(rhs)
    torch.testing.assert_close(solved, torch.linalg.solve(dense_preconditioner(root), rhs), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("case", CASES)
def test_logdet_equals_the_dense_logdet(case):
    root = make_root(**CASES[case])
    logdet = FeatureRootPreconditioner.from_root(root).logdet()
    torch.testing.assert_close(logdet, torch.logdet(dense_preconditioner(root)), rtol=1e-12, atol=1e-10)


def test_logdet_is_the_determinant_lemma_for_one_noise():
    # (N - F) log sigma^2 + log det(sigma^2 I_F + s Phi^T Phi), the form the preconditioner's docs give.
    root = make_root()
    features, scale, noise = root.features, root.outputscale, root.noise.squeeze()
    small = noise * torch.eye(features.size(-1), dtype=features.dtype) + scale * features.mT @ features
    expected = (features.size(0) - features.size(1)) * noise.log() + torch.logdet(small)
    torch.testing.assert_close(FeatureRootPreconditioner.from_root(root).logdet(), expected)


@pytest.mark.parametrize("case", CASES)
def test_operator_is_the_preconditioner(case):
    root = make_root(**CASES[case])
    operator = FeatureRootPreconditioner.from_root(root).operator()
    torch.testing.assert_close(operator.to_dense(), dense_preconditioner(root))


def test_probe_vectors_have_the_preconditioners_covariance():
    # z = Sigma^{1/2} e1 + sqrt(s) Phi e2 ~ N(0, P): each entry of the sample covariance of S draws has variance
    # (P_ii P_jj + P_ij^2) / S, so every entry lies within 5 standard deviations of P.
    root = make_root(heteroscedastic=True, num_points=6, num_features=3)
    operator = FeatureRootPreconditioner.from_root(root).operator()
    num_samples = 20000
    with torch.random.fork_rng():
        torch.manual_seed(0)
        samples = operator.zero_mean_mvn_samples(num_samples)
    empirical = samples.mT @ samples / num_samples
    exact = dense_preconditioner(root)
    sd = ((exact.diagonal().unsqueeze(-1) * exact.diagonal().unsqueeze(-2) + exact.square()) / num_samples).sqrt()
    assert ((empirical - exact).abs() <= 5 * sd).all()


def test_float32_roots_factor_in_float64():
    root64 = make_root(heteroscedastic=True)
    root32 = FeatureRoot(root64.features.float(), root64.outputscale.float(), root64.noise.float())
    preconditioner = FeatureRootPreconditioner.from_root(root32)
    assert preconditioner.factor.cholesky.dtype == torch.float64
    rhs = torch.randn(40, 2, generator=torch.Generator().manual_seed(1))
    solved = preconditioner.solve(rhs)
    assert solved.dtype == torch.float32
    expected = torch.linalg.solve(dense_preconditioner(root32), rhs.double())
    torch.testing.assert_close(solved.double(), expected, rtol=1e-4, atol=1e-4)


def test_logdet_is_differentiable_and_detached_copy_is_not():
    root = make_root(heteroscedastic=True)
    features = root.features.clone().requires_grad_(True)
    noise = root.noise.clone().requires_grad_(True)
    preconditioner = FeatureRootPreconditioner.from_root(FeatureRoot(features, root.outputscale, noise))
    grads = torch.autograd.grad(preconditioner.logdet(), (features, noise))
    dense = lambda f, n: torch.logdet(dense_preconditioner(FeatureRoot(f, root.outputscale, n)))  # noqa: E731
    expected = torch.autograd.grad(dense(features, noise), (features, noise))
    for grad, reference in zip(grads, expected, strict=True):
        torch.testing.assert_close(grad, reference)
    detached = preconditioner.detached()
    assert not detached.features.requires_grad and not detached.factor.cholesky.requires_grad
    assert not detached.solve(torch.ones(40, 1, dtype=torch.float64)).requires_grad


def test_weighted_features_span_the_inverse_of_the_low_rank_part():
    # P^{-1} Phi = Sigma^{-1} Phi C^{-1} (Woodbury): its columns lie in the span of Sigma^{-1} Phi.
    root = make_root(heteroscedastic=True)
    preconditioner = FeatureRootPreconditioner.from_root(root)
    basis = preconditioner.weighted_features()
    torch.testing.assert_close(basis, root.features / root.noise.unsqueeze(-1))
    target = preconditioner.solve(root.features)
    coefficients = torch.linalg.lstsq(basis, target).solution
    torch.testing.assert_close(basis @ coefficients, target, rtol=1e-8, atol=1e-10)


def test_a_root_without_noise_is_an_error():
    root = make_root()
    with pytest.raises(ValueError, match="needs the noise variances"):
        FeatureRootPreconditioner.from_root(FeatureRoot(root.features, root.outputscale))


def test_logdet_of_one_point_with_more_features():
    root = make_root(num_points=1, num_features=4)
    expected = math.log(root.noise.item() + root.outputscale.item() * root.features.square().sum().item())
    assert FeatureRootPreconditioner.from_root(root).logdet().item() == pytest.approx(expected, rel=1e-12)
