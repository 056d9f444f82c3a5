"""Haar-distributed orthogonal matrices (gprf.ops.haar_orthogonal).

Distributional checks use z-score bounds with Z = 5 (two-sided tail 6e-7 per check) and standard
errors estimated from the draws themselves. Reference moments of a Haar Q in O(d):
E[Q_ij] = 0, E[Q_ij^2] = 1/d, E[tr Q] = 0, E[(tr Q)^2] = 1 (d >= 2; the number of fixed points of
the standard representation), and the first column is uniform on the sphere.
"""

from __future__ import annotations

import math

import pytest
import torch

from gprf.ops import haar_orthogonal

Z = 5.0
NUM_DRAWS = 4000


def _within(mean_of_draws: torch.Tensor, target: float | torch.Tensor, draws: torch.Tensor) -> torch.Tensor:
    """|mean - target| <= Z * SE with SE the sample std of the draws / sqrt(n) (draws along dim 0)."""
    se = draws.std(dim=0) / math.sqrt(draws.size(0))
    return (mean_of_draws - target).abs() <= Z * se


@pytest.mark.parametrize("d", [1, 2, 3, 7, 32])
def test_orthogonal_to_machine_precision(d, generator):
    q = haar_orthogonal((5,), d, generator=generator)
    assert q.shape == (5, d, d) and q.dtype == torch.float64
    eye = torch.eye(d, dtype=torch.float64)
    torch.testing.assert_close(q @ q.mT, eye.expand(5, d, d), rtol=0, atol=1e-12)
    torch.testing.assert_close(q.mT @ q, eye.expand(5, d, d), rtol=0, atol=1e-12)


@pytest.mark.parametrize("batch_shape", [(), (4,), (2, 3), torch.Size([1, 2, 1])])
def test_batch_shape(batch_shape, generator):
    q = haar_orthogonal(batch_shape, 6, generator=generator)
    assert q.shape == (*batch_shape, 6, 6)
    torch.testing.assert_close(q @ q.mT, torch.eye(6, dtype=torch.float64).expand_as(q), rtol=0, atol=1e-12)


def test_batch_members_differ(generator):
    q = haar_orthogonal((8,), 5, generator=generator)
    differences = (q.unsqueeze(0) - q.unsqueeze(1)).flatten(-2).abs().amax(-1)
    assert bool((differences + torch.eye(8, dtype=torch.float64) > 1e-3).all())


def test_reproducible_with_seeded_generator():
    a = haar_orthogonal((3,), 9, generator=torch.Generator().manual_seed(7))
    b = haar_orthogonal((3,), 9, generator=torch.Generator().manual_seed(7))
    c = haar_orthogonal((3,), 9, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a, b)
    assert not torch.allclose(a, c)


def test_does_not_touch_global_rng():
    state = torch.random.get_rng_state()
    haar_orthogonal((2,), 4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(torch.random.get_rng_state(), state)


def test_dtype_and_device(dtype, device):
    q = haar_orthogonal((2,), 4, generator=torch.Generator().manual_seed(3), dtype=dtype, device=device)
    reference = haar_orthogonal((2,), 4, generator=torch.Generator().manual_seed(3))
    assert q.dtype == dtype and q.device.type == device.type
    # Drawn on the CPU in float64 and then cast: identical across devices up to the cast.
    torch.testing.assert_close(q.cpu(), reference.to(dtype))


def test_rejects_non_positive_dim():
    with pytest.raises(ValueError, match="dim >= 1"):
        haar_orthogonal((), 0)


@pytest.mark.parametrize("d", [2, 5])
def test_trace_moments_are_haar(d):
    q = haar_orthogonal((NUM_DRAWS,), d, generator=torch.Generator().manual_seed(11))
    trace = q.diagonal(dim1=-2, dim2=-1).sum(-1)
    assert _within(trace.mean(), 0.0, trace)
    assert _within(trace.square().mean(), 1.0, trace.square())


def test_diagonal_is_unbiased_which_needs_the_sign_correction():
    """Without Mezzadri's sign correction the diagonal of Q from a QR is biased; with it, E[Q_ii] = 0."""
    d = 5
    generator = torch.Generator().manual_seed(12)
    q = haar_orthogonal((NUM_DRAWS,), d, generator=generator)
    diagonal = q.diagonal(dim1=-2, dim2=-1)
    assert bool(_within(diagonal.mean(0), 0.0, diagonal).all())

    # Power check: the same statistic rejects the uncorrected QR factor (so the test above can fail).
    raw = torch.linalg.qr(torch.randn(NUM_DRAWS, d, d, generator=generator, dtype=torch.float64)).Q
    raw_diagonal = raw.diagonal(dim1=-2, dim2=-1)
    assert not bool(_within(raw_diagonal.mean(0), 0.0, raw_diagonal).all())


def test_entries_have_haar_second_and_fourth_moments():
    d = 4
    q = haar_orthogonal((NUM_DRAWS,), d, generator=torch.Generator().manual_seed(13))
    entries = q.flatten(-2)  # (n, d*d)
    assert bool(_within(entries.mean(0), 0.0, entries).all())
    assert bool(_within(entries.square().mean(0), 1.0 / d, entries.square()).all())
    # Each column is uniform on the sphere: E[q^4] = 3 / (d (d + 2)).
    fourth = entries.pow(4)
    assert bool(_within(fourth.mean(0), 3.0 / (d * (d + 2)), fourth).all())


def test_one_dimensional_draws_are_fair_signs():
    q = haar_orthogonal((NUM_DRAWS,), 1, generator=torch.Generator().manual_seed(14)).flatten()
    assert bool((q.abs() == 1).all())
    # Fair +-1 coin: mean 0, variance 1.
    assert abs(q.mean().item()) <= Z / math.sqrt(NUM_DRAWS)
