"""NystromPreconditioner: exact for ranks at least that of the Gram, never above it (G - G_hat is positive
semi-definite), consistent powers and log-determinant, the identity at rank 0, and a clear error for a bad rank."""

from __future__ import annotations

import pytest
import torch

from gprf.linalg import NystromPreconditioner


def _gram(num_features=40, rank=None, seed=0):
    generator = torch.Generator().manual_seed(seed)
    root = torch.randn(num_features if rank is None else rank, num_features, generator=generator, dtype=torch.float64)
    scales = torch.logspace(1, -2, root.size(0), dtype=torch.float64).unsqueeze(-1)
    root = root * scales
    return root.mT @ root


def _approximation(preconditioner):
    return (preconditioner.basis * preconditioner.eigenvalues.unsqueeze(-2)) @ preconditioner.basis.mT


@pytest.mark.parametrize("batch", [(), (2,)])
def test_sketch_of_a_low_rank_gram_is_exact(batch):
    gram = _gram(rank=6).expand(*batch, 40, 40)
    preconditioner = NystromPreconditioner.from_gram(gram, rank=10, generator=torch.Generator().manual_seed(1))
    assert preconditioner.rank == 10 and preconditioner.basis.shape == (*batch, 40, 10)
    torch.testing.assert_close(_approximation(preconditioner), gram, rtol=0, atol=1e-9 * gram.abs().max())
    assert (preconditioner.eigenvalues[..., 6:] < 1e-9 * gram.abs().max()).all()  # the sketch found rank 6


def test_sketch_never_exceeds_the_gram_and_rank_is_capped():
    gram = _gram()
    partial = NystromPreconditioner.from_gram(gram, rank=8, generator=torch.Generator().manual_seed(2))
    residual_spectrum = torch.linalg.eigvalsh(gram - _approximation(partial))
    assert residual_spectrum.min() > -1e-9 * gram.abs().max()
    assert residual_spectrum.max() > 1e-6  # a rank-8 sketch of a full-rank Gram is not exact
    full = NystromPreconditioner.from_gram(gram, rank=100, generator=torch.Generator().manual_seed(2))
    assert full.rank == 40
    torch.testing.assert_close(_approximation(full), gram, rtol=0, atol=1e-8 * gram.abs().max())


def test_powers_and_logdet_are_those_of_identity_plus_sketch():
    gram = _gram()
    preconditioner = NystromPreconditioner.from_gram(gram, rank=12, generator=torch.Generator().manual_seed(3))
    dense = torch.eye(40, dtype=torch.float64) + _approximation(preconditioner)
    rhs = torch.randn(40, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    torch.testing.assert_close(preconditioner.power_matmul(rhs, 1.0), dense @ rhs)
    torch.testing.assert_close(preconditioner.solve(rhs), torch.linalg.solve(dense, rhs))
    half = preconditioner.power_matmul(preconditioner.power_matmul(rhs, 0.5), 0.5)
    torch.testing.assert_close(half, dense @ rhs)
    round_trip = preconditioner.power_matmul(preconditioner.power_matmul(rhs, 0.5), -0.5)
    torch.testing.assert_close(round_trip, rhs)
    torch.testing.assert_close(preconditioner.logdet(), torch.logdet(dense))


def test_rank_zero_is_the_identity_and_bad_ranks_are_refused():
    gram = _gram()
    identity = NystromPreconditioner.from_gram(gram, rank=0)
    rhs = torch.randn(40, 2, dtype=torch.float64)
    assert identity.rank == 0 and torch.equal(identity.solve(rhs), rhs) and identity.logdet().item() == 0.0
    with pytest.raises(ValueError, match="rank must be a non-negative integer"):
        NystromPreconditioner.from_gram(gram, rank=-1)
    with pytest.raises(ValueError, match="rank must be a non-negative integer"):
        NystromPreconditioner.from_gram(gram, rank=2.5)
