"""``spectral_projections``: the tridiagonal route (dsytrd, reflectors, dstevd) against ``torch.linalg.eigh``."""

from __future__ import annotations

import math

import pytest
import torch

from gprf.fitting import ScaleStatistics
from gprf.fitting.spectral_projections import spectral_projections


def _gram(num_rows: int, num_features: int, batch_shape=(), seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(*batch_shape, num_rows, num_features, generator=generator, dtype=torch.float64)
    rhs = torch.randn(*batch_shape, num_features, 2, generator=generator, dtype=torch.float64)
    return features.mT @ features, rhs


def _eigenspace_sums(eigenvalues: torch.Tensor, products: torch.Tensor, tolerance: float) -> torch.Tensor:
    """Sums of ``products`` over runs of eigenvalues within ``tolerance`` (one per eigenspace, in place of each)."""
    sums = products.clone()
    start = 0
    for stop in range(1, eigenvalues.numel() + 1):
        if stop == eigenvalues.numel() or eigenvalues[stop] - eigenvalues[stop - 1] > tolerance:
            sums[start:stop] = products[start:stop].sum()
            start = stop
    return sums


def _assert_matches_eigh(gram, rhs, group_tolerance: float = 0.0):
    """λ, a², a·b and b² of both routes agree to 1e-10 relative to their scale (‖G‖, ‖p‖‖q‖)."""
    expected_values, expected = spectral_projections(gram, rhs, method="eigh")
    values, projected = spectral_projections(gram, rhs)
    assert values.shape == expected_values.shape and projected.shape == expected.shape
    scale = expected_values.abs().amax(-1, keepdim=True).clamp_min(1e-300)
    torch.testing.assert_close(values / scale, expected_values / scale, rtol=0, atol=1e-10)
    batch_values = values.expand(projected.shape[:-1])
    for values_b, expected_values_b, projected_b, expected_b in zip(
        batch_values.reshape(-1, values.size(-1)),
        expected_values.expand(projected.shape[:-1]).reshape(-1, values.size(-1)),
        projected.reshape(-1, *projected.shape[-2:]),
        expected.reshape(-1, *projected.shape[-2:]),
        strict=True,
    ):
        a, b = projected_b.unbind(-1)
        a_expected, b_expected = expected_b.unbind(-1)
        norm = (a_expected.square().sum() * b_expected.square().sum()).sqrt()
        tolerance = group_tolerance * expected_values_b.abs().max()
        for product, product_expected in [
            (a * a, a_expected**2),
            (a * b, a_expected * b_expected),
            (b * b, b_expected**2),
        ]:
            torch.testing.assert_close(
                _eigenspace_sums(values_b, product, tolerance) / norm,
                _eigenspace_sums(expected_values_b, product_expected, tolerance) / norm,
                rtol=0,
                atol=1e-10,
            )


@pytest.mark.parametrize("num_features", [1, 2, 3, 50, 257])
def test_eigenvalues_and_projection_products_equal_eigh(num_features):
    gram, rhs = _gram(num_features + 5, num_features, seed=num_features)
    _assert_matches_eigh(gram, rhs)


def test_rank_deficient_gram_fewer_rows_than_features():
    """N = 20 < F = 60: 40 zero eigenvalues whose eigenvectors either route picks freely; their sums agree."""
    generator = torch.Generator().manual_seed(3)
    features = torch.randn(20, 60, generator=generator, dtype=torch.float64)
    gram = features.T @ features
    rhs = torch.stack([features.T @ torch.randn(20, generator=generator, dtype=torch.float64), features.sum(0)], -1)
    _assert_matches_eigh(gram, rhs, group_tolerance=1e-12)
    # The components in the null space vanish on both routes.
    _, projected = spectral_projections(gram, rhs)
    assert projected[:40].abs().max() < 1e-10 * projected.abs().max()


def test_repeated_nonzero_eigenvalues_agree_per_eigenspace():
    generator = torch.Generator().manual_seed(4)
    basis, _ = torch.linalg.qr(torch.randn(30, 30, generator=generator, dtype=torch.float64))
    spectrum = torch.tensor([1.0] * 10 + [2.5] * 7 + [7.0] * 12 + [9.0], dtype=torch.float64)
    gram = basis * spectrum @ basis.T
    gram = (gram + gram.T) / 2
    rhs = torch.randn(30, 2, generator=generator, dtype=torch.float64)
    _assert_matches_eigh(gram, rhs, group_tolerance=1e-12)


def test_batch_and_broadcast_right_hand_sides():
    gram, rhs = _gram(40, 33, batch_shape=(2, 3), seed=5)
    _assert_matches_eigh(gram, rhs)
    # One gram shared by a batch of right-hand sides, and a batch of grams with one right-hand side.
    _assert_matches_eigh(gram[0, 0], rhs)
    shared_values, shared = spectral_projections(gram[0, 0], rhs)
    assert shared_values.shape == (33,) and shared.shape == (2, 3, 33, 2)
    _assert_matches_eigh(gram[:, :1], rhs[0])
    values, projected = spectral_projections(gram[:, :1], rhs[0])
    assert values.shape == (2, 1, 33) and projected.shape == (2, 3, 33, 2)


def test_routes_and_errors():
    gram, rhs = _gram(10, 4)
    # Float32 and tensors that need gradients take eigh; forcing the tridiagonal route needs float64.
    values, _ = spectral_projections(gram.float(), rhs.float())
    assert values.dtype == torch.float32
    values, projected = spectral_projections(gram.requires_grad_(), rhs)
    projected.square().sum().backward()
    assert gram.grad is not None
    with pytest.raises(ValueError, match="float64"):
        spectral_projections(gram.detach().float(), rhs, method="tridiagonal")
    with pytest.raises(ValueError, match="method"):
        spectral_projections(gram.detach(), rhs, method="qr")
    with pytest.raises(ValueError, match="gram"):
        spectral_projections(torch.zeros(3, 4, dtype=torch.float64), rhs)
    with pytest.raises(ValueError, match="rhs"):
        spectral_projections(gram.detach(), torch.zeros(5, 2, dtype=torch.float64))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_take_eigh():
    gram, rhs = _gram(30, 12)
    values, projected = spectral_projections(gram.cuda(), rhs.cuda())
    assert values.is_cuda and projected.is_cuda
    _, expected = spectral_projections(gram, rhs)
    torch.testing.assert_close((projected[:, 0] * projected[:, 1]).cpu(), expected[:, 0] * expected[:, 1])


@pytest.mark.parametrize(("num_data", "num_features"), [(300, 257), (40, 120)], ids=["N>F", "N<F"])
def test_scale_statistics_likelihood_equals_the_eigh_route(num_data, num_features):
    generator = torch.Generator().manual_seed(num_features)
    features = torch.randn(2, num_data, num_features, generator=generator, dtype=torch.float64)
    features = features / math.sqrt(num_features)
    residual = 1.5 + torch.randn(2, num_data, generator=generator, dtype=torch.float64)
    chunks = [(features[..., :25, :], residual[..., :25]), (features[..., 25:, :], residual[..., 25:])]
    statistics = ScaleStatistics.from_chunks(chunks)
    expected = ScaleStatistics.from_chunks(chunks, method="eigh")
    torch.testing.assert_close(statistics.eigenvalues, expected.eigenvalues, rtol=0, atol=1e-10)
    for outputscale, noise, constant in [(1.0, 0.1, 0.0), (3.7, 1e-4, 1.9), (0.2, 2.5, -0.4)]:
        outputscale, noise = torch.tensor(outputscale, dtype=torch.float64), torch.tensor(noise, dtype=torch.float64)
        value = statistics.log_marginal_likelihood(outputscale, noise, constant)
        torch.testing.assert_close(
            value, expected.log_marginal_likelihood(outputscale, noise, constant), rtol=1e-10, atol=0
        )
        torch.testing.assert_close(
            statistics.optimal_constant(outputscale, noise),
            expected.optimal_constant(outputscale, noise),
            rtol=1e-10,
            atol=0,
        )
