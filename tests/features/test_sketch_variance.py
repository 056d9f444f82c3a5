r"""Closed-form variances of polynomial sketches (DESIGN.md §3.3; paper 000 Theorems 2, 5, 10, Corollary 6).

The Monte-Carlo agreement of every formula with the implemented sketches is tested in
``test_sketches.py``; here: an independent transcription of the §3.3 table, the variance table on
non-negative data (``pytest -s`` prints it), and the structural facts the paper states.
"""

from __future__ import annotations

import functools
import math

import pytest
import torch

from gprf.features import PolynomialSketch
from gprf.features.sketch_variance import pair_statistics, sketch_variance, srht_pair_count
from gprf.testing import build_in

Z = 5.0
SKETCHES = ("gaussian", "rademacher", "srht")
DEGREES = tuple(range(1, 10))
TABLE_DIM, TABLE_PAIRS, TABLE_FEATURES = 32, 1000, 512


def _rows(n: int, dim: int, generator: torch.Generator, nonnegative: bool = True) -> torch.Tensor:
    """Rows of |N(0, I)| (or N(0, I)) normalised to unit norm, float64."""
    x = torch.randn(n, dim, generator=generator, dtype=torch.float64)
    if nonnegative:
        x = x.abs()
    return x / x.norm(dim=-1, keepdim=True)


def _map(dim: int, num_features: int, degree: int, sketch: str, is_complex: bool, **kwargs) -> PolynomialSketch:
    return build_in(
        torch.float64, PolynomialSketch, dim, num_features, degree, sketch=sketch, complex=is_complex, seed=0, **kwargs
    )


def _variance(x, y, degree, sketch, is_complex, part="total", num_features=TABLE_FEATURES, **kwargs) -> torch.Tensor:
    return _map(x.size(-1), num_features, degree, sketch, is_complex, **kwargs).variance(x, y, part=part)


# ---------------------------------------------------------------------------------------- the §3.3 table
def _design_table(sketch: str, is_complex: bool, part: str, x, y, p: int, big_d: int, d: int) -> torch.Tensor:
    """DESIGN.md §3.3, transcribed row by row (independently of gprf.features.sketch_variance)."""
    c = (x * y).sum(-1)
    n = x.square().sum(-1) * y.square().sum(-1)
    s = (x.square() * y.square()).sum(-1)
    c2p = c ** (2 * p)
    pairs = (big_d // d) * d * (d - 1) + (big_d % d) * (big_d % d - 1)
    if sketch == "gaussian" and not is_complex:
        return ((n + 2 * c**2) ** p - c2p) / big_d
    if sketch == "gaussian" and part == "real":
        return (0.5 * ((n + c**2) ** p + (2 * c**2) ** p) - c2p) / big_d
    if sketch == "gaussian":
        return ((n + c**2) ** p - c2p) / big_d
    if not is_complex:
        rademacher = ((n + 2 * c**2 - 2 * s) ** p - c2p) / big_d
        if sketch == "rademacher":
            return rademacher
        return rademacher + pairs / big_d**2 * ((c**2 - (n + c**2 - 2 * s) / (d - 1)) ** p - c2p)
    if part == "real":
        rademacher = (0.5 * ((n + c**2 - s) ** p + (2 * c**2 - s) ** p) - c2p) / big_d
        if sketch == "rademacher":
            return rademacher
        return rademacher + 0.5 * pairs / big_d**2 * (
            ((c**2 - (c**2 - s) / (d - 1)) ** p - c2p) + ((c**2 - (n - s) / (d - 1)) ** p - c2p)
        )
    rademacher = ((n + c**2 - s) ** p - c2p) / big_d
    if sketch == "rademacher":
        return rademacher
    return rademacher + pairs / big_d**2 * ((c**2 - (n - s) / (d - 1)) ** p - c2p)


@pytest.mark.parametrize("part", ("real", "total"))
@pytest.mark.parametrize("is_complex", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("sketch", SKETCHES)
@pytest.mark.parametrize(("dim", "bias", "num_features"), [(3, 0.0, 6), (5, 0.0, 3), (5, 0.4, 20), (32, 0.0, 100)])
def test_variance_matches_the_design_table(sketch, is_complex, part, dim, bias, num_features):
    generator = torch.Generator().manual_seed(dim + num_features)
    x = torch.randn(50, dim, generator=generator, dtype=torch.float64)
    y = torch.randn(50, dim, generator=generator, dtype=torch.float64) * 0.7
    for degree in (1, 2, 3, 4, 7):
        feature_map = _map(dim, num_features, degree, sketch, is_complex, bias=bias)
        xa, ya = feature_map.augment(x), feature_map.augment(y)
        expected = _design_table(sketch, is_complex, part, xa, ya, degree, num_features, feature_map.padded_dim)
        torch.testing.assert_close(feature_map.variance(x, y, part=part), expected, rtol=1e-10, atol=1e-12)


def test_real_sketches_have_equal_real_and_total_variance():
    generator = torch.Generator().manual_seed(1)
    x, y = _rows(20, 6, generator, False), _rows(20, 6, generator, False)
    for sketch in SKETCHES:
        for degree in (1, 3, 6):
            assert torch.equal(_variance(x, y, degree, sketch, False, "real"), _variance(x, y, degree, sketch, False))


def test_pair_statistics_and_pair_count():
    x = torch.tensor([[1.0, 2.0, 0.0]], dtype=torch.float64)
    y = torch.tensor([[3.0, -1.0, 5.0]], dtype=torch.float64)
    c, n, s = pair_statistics(x, y)
    assert (c.item(), n.item(), s.item()) == (1.0, 5.0 * 35.0, 9.0 + 4.0)
    # P = floor(D/d) d (d - 1) + (D mod d)(D mod d - 1): ordered pairs of distinct features sharing a block.
    assert srht_pair_count(8, 4) == 2 * 4 * 3
    assert srht_pair_count(10, 4) == 2 * 4 * 3 + 2 * 1
    assert srht_pair_count(3, 8) == 3 * 2
    assert srht_pair_count(1, 8) == 0


# ---------------------------------------------------------------------------------------- the table
@functools.cache
def _table() -> dict[tuple[str, bool], list[float]]:
    """Mean E|k_hat - k|^2 over 1000 pairs of |N(0, I_32)| unit vectors, F = 512, p = 1..9."""
    generator = torch.Generator().manual_seed(1000)
    x, y = _rows(TABLE_PAIRS, TABLE_DIM, generator), _rows(TABLE_PAIRS, TABLE_DIM, generator)
    return {
        (sketch, is_complex): [_variance(x, y, p, sketch, is_complex).mean().item() for p in DEGREES]
        for sketch in SKETCHES
        for is_complex in (False, True)
    }


def _format_table(table: dict[tuple[str, bool], list[float]]) -> str:
    header = f"{'sketch':<20}" + "".join(f"{f'p={p}':>11}" for p in DEGREES)
    lines = [
        f"Mean closed-form E|k_hat - k|^2, {TABLE_PAIRS} pairs of |N(0, I_{TABLE_DIM})| unit vectors, "
        f"F = {TABLE_FEATURES}",
        header,
    ]
    for (sketch, is_complex), values in table.items():
        name = f"{sketch} {'complex' if is_complex else 'real'}"
        lines.append(f"{name:<20}" + "".join(f"{v:>11.4g}" for v in values))
    ratios = [c / r for c, r in zip(table[("gaussian", True)], table[("gaussian", False)], strict=True)]
    lines.append(f"{'gaussian cplx/real':<20}" + "".join(f"{v:>11.4g}" for v in ratios))
    return "\n".join(lines)


def test_variance_table_on_nonnegative_data():
    table = _table()
    print("\n" + _format_table(table))
    for values in table.values():
        assert all(math.isfinite(v) and v >= -1e-12 for v in values)  # p = 1 TensorSRHT: 0 up to rounding
    # p = 1 TensorSRHT with D = 512 a multiple of d = 32: exactly zero.
    assert abs(table[("srht", False)][0]) < 1e-12 and abs(table[("srht", True)][0]) < 1e-12
    # On non-negative data the complex sketches win from p = 2 on, by a growing factor.
    for sketch in SKETCHES:
        real, complex_ = table[(sketch, False)], table[(sketch, True)]
        assert all(cv < rv for cv, rv in zip(complex_[1:], real[1:], strict=True))
    ratios = [c / r for c, r in zip(table[("gaussian", True)], table[("gaussian", False)], strict=True)]
    assert all(b < a for a, b in zip(ratios[1:], ratios[2:], strict=False))


def _gaussian_ratio(x: torch.Tensor, y: torch.Tensor, degree: int = 3) -> torch.Tensor:
    """mean complex E|.|^2 / mean real variance of the Gaussian sketch over the pairs, for each leading batch."""
    c, n, _ = pair_statistics(x, y)
    real = sketch_variance("gaussian", False, "total", c, n, n, degree, TABLE_FEATURES)
    complex_ = sketch_variance("gaussian", True, "total", c, n, n, degree, TABLE_FEATURES)
    return complex_.mean(-1) / real.mean(-1)


def test_complex_real_gaussian_ratio_at_degree_three():
    """The ratio of mean variances at p = 3 is 0.44 (two digits, so +-0.005).

    Its tolerance is the spread of the ratio over independent samples of 1000 pairs (200 samples):
    the table's value lies within Z standard deviations of 0.44 +- 0.005, and the population value
    (the mean over the 200 samples, standard error std/sqrt(200)) lies in 0.44 +- 0.005.
    """
    ratio = _table()[("gaussian", True)][2] / _table()[("gaussian", False)][2]
    generator = torch.Generator().manual_seed(2000)
    samples = 200
    x = _rows(samples * TABLE_PAIRS, TABLE_DIM, generator).view(samples, TABLE_PAIRS, TABLE_DIM)
    y = _rows(samples * TABLE_PAIRS, TABLE_DIM, generator).view(samples, TABLE_PAIRS, TABLE_DIM)
    replicates = _gaussian_ratio(x, y)
    spread = replicates.std().item()
    assert 0 < spread < 0.005  # 1000 pairs pin the ratio to the third digit (spread ~0.001)
    assert abs(ratio - 0.44) <= 0.005 + Z * spread, (ratio, spread)
    population, se = replicates.mean().item(), spread / math.sqrt(samples)
    assert abs(population - 0.44) <= 0.005 + Z * se, (population, se)
    # The statistic has power: Var Re of the complex sketch (ratio ~0.27) is rejected.
    c, n, _ = pair_statistics(x[0], y[0])
    var_re = sketch_variance("gaussian", True, "real", c, n, n, 3, TABLE_FEATURES).mean()
    real = sketch_variance("gaussian", False, "real", c, n, n, 3, TABLE_FEATURES).mean()
    assert abs(var_re / real - 0.44) > 0.005 + Z * spread


# ---------------------------------------------------------------------------------------- structural facts
def _random_inputs(dim: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Signed and non-negative unit rows, plus unnormalised rows and a pair (x, x)."""
    generator = torch.Generator().manual_seed(seed)
    x, y = (
        torch.cat(
            [
                _rows(40, dim, generator, False),
                _rows(40, dim, generator),
                scale * torch.randn(20, dim, generator=generator, dtype=torch.float64),
            ]
        )
        for scale in (3.0, 0.5)
    )
    return torch.cat([x, x[:1]]), torch.cat([y, x[:1]])


@pytest.mark.parametrize("bias", (0.0, 0.8))
@pytest.mark.parametrize(("dim", "num_features"), [(3, 4), (3, 12), (5, 8), (5, 24), (32, 512), (1, 2), (1, 6)])
def test_degree_one_srht_variance_is_zero_for_whole_blocks(dim, num_features, bias):
    x, y = _random_inputs(dim, seed=dim)
    for is_complex in (False, True):
        feature_map = _map(dim, num_features, 1, "srht", is_complex, bias=bias)
        assert num_features % feature_map.padded_dim == 0  # whole blocks (the bias may change padded_dim)
        for part in ("real", "total"):
            scale = 1 + feature_map.expected_kernel(x, y).abs()
            assert bool((feature_map.variance(x, y, part=part).abs() <= 1e-12 * scale).all())


@pytest.mark.parametrize("bias", (0.0, 0.8))
@pytest.mark.parametrize(("dim", "num_features"), [(3, 3), (3, 4), (3, 6), (5, 8), (5, 13), (32, 100), (32, 512)])
def test_odd_degree_srht_variance_is_at_most_rademacher(dim, num_features, bias):
    """Paper 000 Corollary 6: for odd p, real TensorSRHT <= real Rademacher, elementwise.

    The within-block term is P/D^2 [(c^2 - A/(d-1))^p - c^(2p)] with A = N + c^2 - 2S
    = sum_{k<l} (x_k y_l + x_l y_k)^2 >= 0, and t -> t^p is increasing for odd p. The same holds for
    complex E|.|^2 (A = N - S >= 0). For even p the term can be positive (tested below).
    """
    x, y = _random_inputs(dim, seed=100 + dim)
    for degree in (1, 3, 5, 7, 9):
        for is_complex in (False, True):
            srht = _variance(x, y, degree, "srht", is_complex, num_features=num_features, bias=bias)
            rademacher = _variance(x, y, degree, "rademacher", is_complex, num_features=num_features, bias=bias)
            assert bool((srht <= rademacher * (1 + 1e-12) + 1e-15).all())


def test_even_degree_srht_variance_can_exceed_rademacher():
    # Nearly orthogonal signed pairs: A/(d-1) > 2c^2 makes (c^2 - A/(d-1))^p > c^(2p) for even p.
    x, y = _random_inputs(3, seed=7)
    for degree in (2, 4):
        srht = _variance(x, y, degree, "srht", False, num_features=6)
        rademacher = _variance(x, y, degree, "rademacher", False, num_features=6)
        assert bool((srht > rademacher).any())
