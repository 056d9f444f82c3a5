"""gprf.linalg.points_factor: the N x N factor of a feature-root covariance, its solves, and the check of its data."""

from __future__ import annotations

import pytest
import torch

import gprf
from gprf.exceptions import NonFiniteTrainingDataError
from gprf.linalg import FeatureRoot, factor_points, points_gram


def _root(batch=(2,), n=7, f=12, heteroscedastic=True, dtype=torch.float64) -> FeatureRoot:
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(*batch, n, f, generator=generator, dtype=torch.float64).to(dtype)
    outputscale = (0.5 + torch.rand(*batch, generator=generator, dtype=torch.float64)).to(dtype)
    shape = (*batch, n if heteroscedastic else 1)
    noise = (0.05 + 0.1 * torch.rand(*shape, generator=generator, dtype=torch.float64)).to(dtype)
    return FeatureRoot(features, outputscale=outputscale, noise=noise)


@pytest.mark.parametrize("heteroscedastic", [True, False])
def test_factor_is_the_cholesky_factor_of_the_covariance(heteroscedastic):
    root = _root(heteroscedastic=heteroscedastic)
    factor = factor_points(root)
    covariance = root.outputscale[..., None, None] * root.features @ root.features.mT
    covariance = covariance + torch.diag_embed(root.noise.expand(2, 7))
    torch.testing.assert_close(factor.cholesky @ factor.cholesky.mT, covariance, rtol=0, atol=1e-12)
    torch.testing.assert_close(factor.features, root.scaled_features(), rtol=0, atol=0)
    rhs = torch.randn(5, 2, 7, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)  # extra batch
    torch.testing.assert_close(factor.solve(rhs), torch.linalg.solve(covariance, rhs), rtol=0, atol=1e-10)
    whitened = factor.whiten(rhs)
    torch.testing.assert_close(factor.cholesky @ whitened, rhs, rtol=0, atol=1e-12)


def test_float32_roots_are_factored_in_the_factor_dtype():
    root = _root(dtype=torch.float32)
    assert factor_points(root).cholesky.dtype == torch.float64
    with gprf.settings.factor_dtype(torch.float32):
        assert factor_points(root).cholesky.dtype == torch.float32


def test_non_finite_rows_are_counted():
    root = _root()
    features = root.features.clone()
    features[1, 3, 0] = float("nan")
    with pytest.raises(NonFiniteTrainingDataError, match="1 of 7 training points"):
        factor_points(FeatureRoot(features, noise=root.noise))
    targets = torch.zeros(2, 7, 1, dtype=torch.float64)
    targets[0, 5] = float("inf")
    with pytest.raises(NonFiniteTrainingDataError, match="1 of 7 training points"):
        factor_points(root, targets)


def test_a_root_without_noise_is_refused():
    with pytest.raises(ValueError, match="needs its noise variances"):
        factor_points(FeatureRoot(torch.ones(3, 2, dtype=torch.float64)))


def test_points_gram_and_its_one_product_backward_are_autograds():
    """Value, first and second derivatives against autograd through ``features @ features.mT`` (batched)."""
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(2, 7, 11, generator=generator, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, 7, 7, generator=generator, dtype=torch.float64)  # not symmetric: both halves count
    torch.testing.assert_close(points_gram(features), features @ features.mT, rtol=1e-14, atol=0)
    (ours,) = torch.autograd.grad((points_gram(features) * weights).sum(), features, create_graph=True)
    (reference,) = torch.autograd.grad((features @ features.mT * weights).sum(), features, create_graph=True)
    torch.testing.assert_close(ours, reference, rtol=1e-13, atol=0)
    # The backward is itself differentiable (Hessian-vector products through the marginal likelihood).
    torch.testing.assert_close(
        torch.autograd.grad(ours.square().sum(), features)[0],
        torch.autograd.grad(reference.square().sum(), features)[0],
        rtol=1e-12,
        atol=0,
    )
    assert torch.autograd.gradcheck(points_gram, (features[:1, :4, :5].detach().requires_grad_(),))


def test_points_gram_refuses_what_it_cannot_form_and_keeps_empty_shapes():
    with pytest.raises(ValueError, match=r"points_gram: features must be a tensor of shape \(\.\.\., N, F\), got \(5"):
        points_gram(torch.ones(5))
    with pytest.raises(ValueError, match="got list"):
        points_gram([[1.0]])
    with pytest.raises(TypeError, match="real floating-point .* got torch.int64"):
        points_gram(torch.ones(3, 2, dtype=torch.long))
    with pytest.raises(TypeError, match="conjugate.*complex128"):
        points_gram(torch.ones(3, 2, dtype=torch.complex128))
    # No rows or no features: an empty or a zero Gram, as the product gives.
    assert points_gram(torch.ones(2, 0, 4)).shape == (2, 0, 0)
    assert torch.equal(points_gram(torch.ones(3, 0, dtype=torch.float64)), torch.zeros(3, 3, dtype=torch.float64))
