"""Scrambled Sobol draws (gprf.ops.sobol_uniform / sobol_normal).

Scrambling makes every point marginally uniform, so averages over the points are unbiased and the
usual iid variance bounds apply conservatively (Z = 5 bounds with the iid standard error). The QMC
advantage is checked against the closed-form iid variance of the same estimator over independent
scrambles.
"""

from __future__ import annotations

import math

import pytest
import torch

from gprf.ops import sobol_normal, sobol_uniform

pytestmark = pytest.mark.usefixtures("single_thread")

Z = 5.0


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize(("num_points", "dim"), [(1, 1), (7, 3), (64, 10), (100, 65)])
def test_uniform_shape_and_open_interval(num_points, dim):
    u = sobol_uniform(num_points, dim, generator=_gen(0))
    assert u.shape == (num_points, dim) and u.dtype == torch.float64
    assert bool((u > 0).all()) and bool((u < 1).all())


def test_normal_shape_and_finite():
    z = sobol_normal(128, 6, generator=_gen(0))
    assert z.shape == (128, 6) and z.dtype == torch.float64
    assert bool(torch.isfinite(z).all())


@pytest.mark.parametrize("fn", [sobol_uniform, sobol_normal])
def test_dtype_and_device(fn, dtype, device):
    out = fn(16, 3, generator=_gen(1), dtype=dtype, device=device)
    assert out.dtype == dtype and out.device.type == device.type
    torch.testing.assert_close(out.cpu(), fn(16, 3, generator=_gen(1)).to(dtype))


@pytest.mark.parametrize("fn", [sobol_uniform, sobol_normal])
def test_reproducible_and_seed_dependent(fn):
    a = fn(32, 4, generator=_gen(5))
    assert torch.equal(a, fn(32, 4, generator=_gen(5)))
    assert not torch.allclose(a, fn(32, 4, generator=_gen(6)))


def test_generator_advances_so_consecutive_draws_differ():
    generator = _gen(9)
    assert not torch.allclose(sobol_uniform(16, 2, generator=generator), sobol_uniform(16, 2, generator=generator))


def test_does_not_touch_global_rng():
    state = torch.random.get_rng_state()
    sobol_normal(8, 2, generator=_gen(0))
    assert torch.equal(torch.random.get_rng_state(), state)


def test_independent_of_default_dtype():
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float32)
        under_float32 = sobol_uniform(4, 3, generator=_gen(0))
        torch.set_default_dtype(torch.float64)
        under_float64 = sobol_uniform(4, 3, generator=_gen(0))
    finally:
        torch.set_default_dtype(previous)
    assert torch.equal(under_float32, under_float64)


def test_normal_is_inverse_cdf_of_uniform():
    u = sobol_uniform(50, 3, generator=_gen(2))
    torch.testing.assert_close(sobol_normal(50, 3, generator=_gen(2)), torch.special.ndtri(u))


def test_rejects_too_many_dimensions():
    with pytest.raises(ValueError, match="dim"):
        sobol_uniform(4, torch.quasirandom.SobolEngine.MAXDIM + 1)


def test_stratification_of_one_dimensional_projections():
    # The first 2^k points of a (scrambled) Sobol sequence put exactly one point in every interval
    # [j / 2^k, (j + 1) / 2^k) of each coordinate -- the property iid draws lack.
    n = 64
    u = sobol_uniform(n, 8, generator=_gen(3))
    cells = torch.floor(u * n).long()
    for column in cells.mT:
        assert torch.equal(torch.sort(column).values, torch.arange(n))


def test_normal_marginal_mean_and_variance():
    n, dim = 1024, 8
    z = sobol_normal(n, dim, generator=_gen(4))
    # iid bounds: SE(mean) = 1/sqrt(n), SE(sample variance) = sqrt(2/n) for normals.
    assert bool((z.mean(0).abs() <= Z / math.sqrt(n)).all())
    assert bool(((z.var(0) - 1.0).abs() <= Z * math.sqrt(2.0 / n)).all())


def test_uniform_points_are_marginally_uniform_over_scrambles():
    # Each scrambled point is marginally uniform: over independent scrambles every point has
    # mean 1/2 (iid variance 1/12) and E[(u - 1/2)^2] = 1/12 (variance 1/80 - 1/144 = 1/180).
    reps, n, dim = 100, 8, 3
    generator = _gen(5)
    points = torch.stack([sobol_uniform(n, dim, generator=generator) for _ in range(reps)])  # (reps, n, dim)
    assert bool(((points.mean(0) - 0.5).abs() <= Z * math.sqrt(1.0 / 12.0 / reps)).all())
    second = (points - 0.5).square().mean(0)
    assert bool(((second - 1.0 / 12.0).abs() <= Z * math.sqrt(1.0 / 180.0 / reps)).all())


def _mse_over_scrambles(estimates: torch.Tensor, target: float) -> tuple[float, float]:
    """Mean squared error over independent scrambles and its standard error."""
    sq = (estimates - target).square()
    return sq.mean().item(), (sq.std() / math.sqrt(sq.numel())).item()


def test_uniform_beats_iid_on_a_smooth_integrand():
    # f(u) = prod_j (1 + (u_j - 1/2)): integral 1, iid variance prod_j (1 + 1/12) - 1.
    reps, n, dim = 100, 256, 5
    generator = _gen(6)
    estimates = torch.stack(
        [(1.0 + (sobol_uniform(n, dim, generator=generator) - 0.5)).prod(-1).mean() for _ in range(reps)]
    )
    iid_mse = ((1.0 + 1.0 / 12.0) ** dim - 1.0) / n
    mse, se = _mse_over_scrambles(estimates, 1.0)
    # The scrambled-Sobol MSE plus its sampling error is below the iid MSE (in fact far below:
    # the rate is O(n^-3 log^s n) for smooth integrands).
    assert mse + Z * se < iid_mse
    assert mse < iid_mse / 50


def test_normal_beats_iid_on_the_fourier_integrand():
    # E[cos(a^T z)] = exp(-|a|^2 / 2) for z ~ N(0, I); iid variance [(1 + exp(-2|a|^2)) / 2 - exp(-|a|^2)^2] / n.
    reps, n, dim = 100, 256, 4
    a = torch.tensor([0.9, -0.4, 0.3, 0.6], dtype=torch.float64)
    generator = _gen(7)
    estimates = torch.stack([torch.cos(sobol_normal(n, dim, generator=generator) @ a).mean() for _ in range(reps)])
    sq_norm = a.square().sum().item()
    target = math.exp(-sq_norm / 2)
    iid_mse = ((1 + math.exp(-2 * sq_norm)) / 2 - math.exp(-sq_norm) ** 2) / n
    mse, se = _mse_over_scrambles(estimates, target)
    assert mse + Z * se < iid_mse
    # Unbiased: the mean over scrambles matches the target within its standard error.
    assert abs(estimates.mean().item() - target) <= Z * estimates.std().item() / math.sqrt(reps)


def test_float32_points_stay_inside_the_open_cube():
    points = sobol_uniform(4096, 8, generator=_gen(3), dtype=torch.float32)
    assert ((points > 0) & (points < 1)).all()
    assert torch.isfinite(torch.special.ndtri(points)).all()


def test_empty_requests_are_clear_errors():
    with pytest.raises(ValueError, match="num_points >= 1"):
        sobol_uniform(0, 3)
    with pytest.raises(ValueError, match="dim >= 1"):
        sobol_uniform(3, 0)
