"""gprf.linalg.points_factor: the N x N factor of a feature-root covariance, its solves, and the check of its data."""

from __future__ import annotations

import pytest
import torch

import gprf
from gprf.exceptions import NonFiniteTrainingDataError
from gprf.linalg import FeatureRoot, factor_points


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
