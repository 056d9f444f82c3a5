r"""Tests of PolynomialSketch (DESIGN.md §3.3): Monte Carlo against the closed forms, and the contract.

Notation: :math:`\hat k(x, y) = \mathrm{Re}\,\phi(x)^\top\overline{\phi(y)}` (complex maps) or
:math:`\phi(x)^\top\phi(y)` (real maps), :math:`k = (x^\top y + \text{bias})^p`.

Every Monte-Carlo test draws its ``n`` independent sketches as one module with ``batch_shape=(n,)``,
uses fixed seeds, and accepts with a z-score bound ``|estimate - target| <= Z * SE``, SE estimated from
the draws: ``std / sqrt(n)`` for a mean, and ``sqrt((mu_4 - s^4) / n)`` (fourth central moment) for a
sample variance. With Z = 5 a correct implementation fails a single check with probability below 6e-7
*when the statistic is close to normal*.

Products of Gaussian projections are far from normal: the second moment of a degree-p Gaussian
feature is carried by events whose probability falls geometrically in p (for ``x = y``, all p
projections beyond ~2 standard deviations), and a sample that misses them underestimates both the
variance and its standard error, so the check fails on the low side. The budgets in ``_BUDGET`` were
chosen by rerunning every check of this file over 30 independent seeds per configuration (about 60 000
z-scores): largest |z| 4.16 for Rademacher/TensorSRHT, 4.56 for Gaussian, 3.24 for TensorSketch. At
p = 5 no affordable budget makes the two-sided Gaussian variance check reliable (4e5 features still
left 20 % of seeds below z = -5; the dominant events have probability ~1e-6 and the fourth-moment
standard error depends on events of probability ~1e-12), so there the check is one-sided: the
self-normalised upper tail is bounded (a rare large draw inflates s^2 and its SE together; largest
upper z over the 30 seeds 2.3). Correctness of the p = 5 Gaussian formulas rests on the exact product
structure (``test_dense_sketches_are_products_of_independent_projections``) together with the
two-sided checks at p <= 3.
"""

from __future__ import annotations

import copy
import functools
import math
import pickle

import numpy as np
import pytest
import torch
from scipy.linalg import hadamard

from gprf.features import SKETCHES, FeatureMap, PolynomialSketch
from gprf.features.sketch_variance import pair_statistics, sketch_variance
from gprf.testing import check_resample, random_buffers

pytestmark = pytest.mark.usefixtures("single_thread")

Z = 5.0
DIM = 3  # TensorSRHT pads 3 -> 4
BIAS_DIM = 4  # with a bias the sketch sees 5 coordinates; TensorSRHT pads 5 -> 8
BIAS = 0.5
DEGREES = (1, 2, 3, 5)
VARIANCE_SKETCHES = ("gaussian", "rademacher", "srht")
DATA = ("nonnegative", "signed")
# (sketch, complex) pairs that exist.
CASES = [(s, c) for s in VARIANCE_SKETCHES for c in (False, True)] + [("tensorsketch", False)]
CASE_IDS = [f"{s}-{'complex' if c else 'real'}" for s, c in CASES]


def _sketch(*args, dtype: torch.dtype = torch.float64, **kwargs) -> PolynomialSketch:
    """A sketch whose draws are stored in ``dtype`` (maps use the default dtype at construction)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        return PolynomialSketch(*args, **kwargs)
    finally:
        torch.set_default_dtype(previous)


def _unit_rows(n: int, dim: int, seed: int, nonnegative: bool) -> torch.Tensor:
    """Rows of N(0, I) (or |N(0, I)|) normalised to unit norm, float64."""
    x = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    if nonnegative:
        x = x.abs()
    return x / x.norm(dim=-1, keepdim=True)


@functools.cache
def _pairs(data: str, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Three random pairs of unit vectors plus one pair (x, x)."""
    nonnegative = data == "nonnegative"
    x = _unit_rows(3, dim, seed=11 + dim, nonnegative=nonnegative)
    y = _unit_rows(3, dim, seed=23 + dim, nonnegative=nonnegative)
    return torch.cat([x, x[:1]]), torch.cat([y, x[:1]])


def _estimates(feature_map: PolynomialSketch, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """phi(x_i) . conj(phi(y_i)) for every batch member: shape (*batch_shape, n), complex for complex maps."""
    fx, fy = feature_map(x), feature_map(y)
    return (fx * fy.conj()).sum(-1)


# (num_draws, num_features) per (sketch family, degree). Rademacher and TensorSRHT projections of
# 3-5 dimensional unit vectors are bounded, so a few thousand draws give near-normal statistics.
# Gaussian products need n * F ~ 1e6 features at p = 3 (with 1.2e5, 1 % of seeds fell below z = -5 and
# 6 % below z = -4 for signed data; with 1e6 the lowest z over 40 seeds was -3.6). TensorSRHT uses one
# full block plus a partial block of 2 (num_features = padded_dim + 2).
_BUDGET = {
    "gaussian": {1: (2000, 10), 2: (10000, 20), 3: (20000, 50), 5: (20000, 50)},
    "bounded": {1: (2000, None), 2: (4000, None), 3: (8000, None), 5: (20000, None)},
}
HEAVY_TAILED = {("gaussian", 5)}


def _config(sketch: str, degree: int, bias: float) -> tuple[int, int, int]:
    """(input_dim, num_draws, num_features) of a Monte-Carlo configuration."""
    dim = BIAS_DIM if bias else DIM
    if sketch == "gaussian":
        draws, features = _BUDGET["gaussian"][degree]
    else:
        draws, _ = _BUDGET["bounded"][degree]
        padded = 1 << (dim + (1 if bias else 0) - 1).bit_length()
        features = padded + 2 if sketch == "srht" else 6
    return dim, draws, features


@functools.cache
def _draws(sketch: str, is_complex: bool, degree: int, data: str, bias: float, seed: int):
    """(map without the batch, x, y, estimates of shape (num_draws, 4)) of a configuration."""
    dim, num_draws, num_features = _config(sketch, degree, bias)
    x, y = _pairs(data, dim)
    batched = _sketch(
        dim, num_features, degree, sketch=sketch, complex=is_complex, bias=bias, batch_shape=(num_draws,), seed=seed
    )
    estimates = _estimates(batched, x, y)
    plain = _sketch(dim, num_features, degree, sketch=sketch, complex=is_complex, bias=bias, seed=0)
    return plain, x, y, estimates


def _seed(sketch: str, is_complex: bool, degree: int, data: str, bias: float) -> int:
    return 10_000 + 1000 * SKETCHES.index(sketch) + 100 * is_complex + 10 * degree + DATA.index(data) + 5 * (bias > 0)


def _mean_check(draws: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(|mean - target| <= Z SE per column, z-scores), draws along dim 0."""
    n = draws.size(0)
    diff = draws.mean(0) - target
    se = draws.std(0) / math.sqrt(n)
    return diff.abs() <= Z * se, diff / se


def _variance_check(draws: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(two-sided ok, upper-side ok, z) of the sample variance against ``target``.

    Standard error of the sample variance from the fourth central moment: Var(s^2) ~ (mu_4 - s^4) / n.
    """
    n = draws.size(0)
    centred = draws - draws.mean(0)
    sample_var = centred.square().sum(0) / (n - 1)
    se = ((centred.pow(4).mean(0) - sample_var.square()) / n).sqrt()
    diff = sample_var - target
    return diff.abs() <= Z * se, diff <= Z * se, diff / se


def _monte_carlo(sketch: str, is_complex: bool, degree: int, data: str, bias: float, seed: int | None = None):
    """Every statistic of a configuration: dict name -> (two-sided ok, upper ok, z)."""
    if seed is None:
        seed = _seed(sketch, is_complex, degree, data, bias)
    feature_map, x, y, estimates = _draws(sketch, is_complex, degree, data, bias, seed)
    target = feature_map.expected_kernel(x, y)
    real = estimates.real if is_complex else estimates
    ok, z = _mean_check(real, target)
    out = {"mean": (ok, ok, z)}
    if is_complex:
        ok, z = _mean_check(estimates.imag, torch.zeros_like(target))
        out["imag mean"] = (ok, ok, z)
    if sketch != "tensorsketch":
        out["variance"] = _variance_check(real, feature_map.variance(x, y, part="real"))
        error = (estimates - target).abs().square()
        ok, z = _mean_check(error, feature_map.variance(x, y, part="total"))
        upper = error.mean(0) - feature_map.variance(x, y, part="total") <= Z * error.std(0) / math.sqrt(len(error))
        out["total"] = (ok, upper, z)
    return out


def _assert_monte_carlo(sketch: str, is_complex: bool, degree: int, data: str, bias: float) -> None:
    results = _monte_carlo(sketch, is_complex, degree, data, bias)
    one_sided = (sketch, degree) in HEAVY_TAILED
    for name, (two_sided, upper, z) in results.items():
        ok = upper if one_sided and name in ("variance", "total") else two_sided
        assert bool(ok.all()), f"{name}: z = {z.tolist()}"


# ---------------------------------------------------------------------------------------- Monte Carlo
@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("degree", DEGREES)
@pytest.mark.parametrize("is_complex", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("sketch", VARIANCE_SKETCHES)
def test_monte_carlo_matches_closed_forms(sketch, is_complex, degree, data):
    """(a) E[k_hat] = (x.y)^p, E Im = 0; (b) Var Re k_hat = variance('real'), E|k_hat - k|^2 = variance('total')."""
    _assert_monte_carlo(sketch, is_complex, degree, data, 0.0)


@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("degree", (2, 3))
@pytest.mark.parametrize("is_complex", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("sketch", VARIANCE_SKETCHES)
def test_monte_carlo_matches_closed_forms_with_bias(sketch, is_complex, degree, data):
    _assert_monte_carlo(sketch, is_complex, degree, data, BIAS)


@pytest.mark.parametrize("bias", (0.0, BIAS))
@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("degree", DEGREES)
def test_tensorsketch_is_unbiased(degree, data, bias):
    _assert_monte_carlo("tensorsketch", False, degree, data, bias)


def test_tensorsketch_has_no_closed_form_variance():
    feature_map = _sketch(DIM, 8, 2, sketch="tensorsketch", seed=0)
    x, y = _pairs("signed", DIM)
    with pytest.raises(NotImplementedError, match="TensorSketch"):
        feature_map.variance(x, y)
    with pytest.raises(NotImplementedError, match="TensorSketch"):
        feature_map.variance(x, y, part="total")


def test_monte_carlo_configurations_cover_srht_padding_and_partial_blocks():
    for bias in (0.0, BIAS):
        dim, _, num_features = _config("srht", 2, bias)
        feature_map = _sketch(dim, num_features, 2, sketch="srht", bias=bias, seed=0)
        assert feature_map.sketch_dim & (feature_map.sketch_dim - 1) != 0  # not a power of two: padded
        assert feature_map.padded_dim > feature_map.sketch_dim
        assert num_features % feature_map.padded_dim != 0 and feature_map.num_blocks == 2  # a partial block


def test_batch_members_are_independent_draws():
    # Lag-1 and half-split sample correlations of independent draws are ~ N(0, 1/n).
    for sketch in ("gaussian", "srht", "tensorsketch"):
        _, _, _, draws = _draws(sketch, False, 2, "signed", 0.0, _seed(sketch, False, 2, "signed", 0.0))
        centred = draws - draws.mean(0)
        n = draws.size(0)
        lag1 = (centred[1:] * centred[:-1]).mean(0) / centred.square().mean(0)
        halves = (centred[: n // 2] * centred[n // 2 :]).mean(0) / centred.square().mean(0)
        assert bool((lag1.abs() <= Z / math.sqrt(n)).all()), (sketch, lag1)
        assert bool((halves.abs() <= Z / math.sqrt(n // 2)).all()), (sketch, halves)


# ---------------------------------------------------------------------------------------- power
def _wrong_variance(sketch: str, is_complex: bool, degree: int, data: str, bias: float = 0.0):
    feature_map, x, y, estimates = _draws(
        sketch, is_complex, degree, data, bias, _seed(sketch, is_complex, degree, data, bias)
    )
    c, n, s = pair_statistics(feature_map.augment(x), feature_map.augment(y))
    args = (c, n, s, degree, feature_map.num_features, feature_map.padded_dim)
    real = estimates.real if is_complex else estimates
    return feature_map, x, y, real, estimates, args


@pytest.mark.parametrize("bias", (0.0, BIAS))
def test_variance_check_rejects_wrong_formulas(bias):
    """The statistics can fail: formulas of the neighbouring sketch are rejected."""
    degree, data = 2, "nonnegative"
    # Rademacher with the Gaussian formula (no fourth-moment defect -2S).
    _, _, _, real, _, args = _wrong_variance("rademacher", False, degree, data, bias)
    assert not bool(_variance_check(real, sketch_variance("gaussian", False, "real", *args))[0].all())
    # TensorSRHT without the within-block covariance (the Rademacher formula).
    _, _, _, real, _, args = _wrong_variance("srht", False, degree, data, bias)
    assert not bool(_variance_check(real, sketch_variance("rademacher", False, "real", *args))[0].all())
    # Complex TensorSRHT: E|.|^2 instead of Var Re, and Var Re instead of E|.|^2.
    feature_map, x, y, real, estimates, args = _wrong_variance("srht", True, degree, data, bias)
    assert not bool(_variance_check(real, feature_map.variance(x, y, part="total"))[0].all())
    error = (estimates - feature_map.expected_kernel(x, y)).abs().square()
    assert not bool(_mean_check(error, feature_map.variance(x, y, part="real"))[0].all())
    # Complex Gaussian with the real Gaussian formula.
    feature_map, x, y, real, _, args = _wrong_variance("gaussian", True, degree, data, bias)
    assert not bool(_variance_check(real, sketch_variance("gaussian", False, "real", *args))[0].all())


def test_heavy_tailed_one_sided_check_has_power():
    """At p = 5 the Gaussian variance checks are one-sided and weak, but not empty.

    Over 6 seeds x 16 pairs the sample variance of 20000 draws (F = 50) fell at 0.67-4.2 times the truth
    (median 0.97) with an estimated relative standard error of 0.04-0.75 (median 0.11), so only gross
    errors are reliably detectable: here a variance F times too small (features summed instead of
    averaged). Correctness at p = 5 rests on the
    exact product structure (test_dense_sketches_are_products_of_independent_projections) together
    with the two-sided checks at p <= 3.
    """
    for is_complex in (False, True):
        for data in DATA:
            feature_map, x, y, estimates = _draws(
                "gaussian", is_complex, 5, data, 0.0, _seed("gaussian", is_complex, 5, data, 0.0)
            )
            real = estimates.real if is_complex else estimates
            _, upper, _ = _variance_check(real, feature_map.variance(x, y) / feature_map.num_features)
            assert not bool(upper.all())
            error = (estimates - feature_map.expected_kernel(x, y)).abs().square()
            too_small = feature_map.variance(x, y, part="total") / feature_map.num_features
            assert not bool((error.mean(0) - too_small <= Z * error.std(0) / math.sqrt(len(error))).all())


@pytest.mark.parametrize("sketch", ("gaussian", "srht", "tensorsketch"))
def test_mean_check_rejects_wrong_degree(sketch):
    feature_map, x, y, estimates = _draws(sketch, False, 2, "signed", 0.0, _seed(sketch, False, 2, "signed", 0.0))
    wrong = _sketch(DIM, 4, 3, sketch=sketch, seed=0).expected_kernel(x, y)
    assert not bool(_mean_check(estimates, wrong)[0].all())


# ---------------------------------------------------------------------------------------- exact structure
def _project(z: torch.Tensor, weights: torch.Tensor, is_complex: bool) -> torch.Tensor:
    w = torch.view_as_complex(weights) if is_complex else weights
    return z.to(w.dtype) @ w


@pytest.mark.parametrize("degree", (1, 2, 5))
@pytest.mark.parametrize("bias", (0.0, BIAS))
@pytest.mark.parametrize("is_complex", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize("sketch", ("gaussian", "rademacher"))
def test_dense_sketches_are_products_of_independent_projections(sketch, is_complex, bias, degree):
    """phi(x) = D^-1/2 prod_i W_i [sqrt(bias), x] with the stored draws (all degrees, incl. p = 5)."""
    feature_map = _sketch(DIM, 7, degree, sketch=sketch, complex=is_complex, bias=bias, batch_shape=(2,), seed=3)
    x = _unit_rows(5, DIM, seed=1, nonnegative=False)
    z = torch.cat([torch.full((5, 1), math.sqrt(bias), dtype=torch.float64), x], -1) if bias else x
    expected = 1.0
    for i in range(degree):
        expected = expected * _project(z, feature_map.weights[:, i], is_complex)
    torch.testing.assert_close(feature_map(x), expected / math.sqrt(7))
    # Entry laws: real N(0,1) / ±1; complex CN(0,1) (each part N(0, 1/2)) / uniform on {±1, ±i}.
    w = feature_map.weights
    if sketch == "rademacher":
        values = torch.view_as_complex(w) if is_complex else w
        allowed = torch.tensor([1, -1, 1j, -1j] if is_complex else [1.0, -1.0], dtype=values.dtype)
        assert bool((values.unsqueeze(-1) == allowed).any(-1).all())
    elif is_complex:
        assert w.shape[-1] == 2 and bool((w[..., 1] != 0).all())


@pytest.mark.parametrize("degree", (1, 2, 3))
@pytest.mark.parametrize(("dim", "bias", "num_features"), [(3, 0.0, 6), (3, 0.0, 3), (4, 0.0, 9), (4, 0.7, 11)])
@pytest.mark.parametrize("is_complex", [False, True], ids=["real", "complex"])
def test_srht_matches_dense_hadamard_construction(is_complex, dim, bias, num_features, degree):
    """Block b = prod_i P_{b,i} H D_{b,i} x_pad with H = scipy.linalg.hadamard(d); keep the first F, / sqrt(F)."""
    feature_map = _sketch(dim, num_features, degree, sketch="srht", complex=is_complex, bias=bias, seed=5)
    d = feature_map.padded_dim
    assert d == 1 << (dim + (bias > 0) - 1).bit_length()
    x = _unit_rows(4, dim, seed=2, nonnegative=False)
    z = torch.cat([torch.full((4, 1), math.sqrt(bias), dtype=torch.float64), x], -1) if bias else x
    z = torch.nn.functional.pad(z, (0, d - z.size(-1)))
    h = torch.as_tensor(hadamard(d), dtype=torch.float64)
    signs = torch.view_as_complex(feature_map.signs) if is_complex else feature_map.signs
    blocks = []
    for b in range(feature_map.num_blocks):
        block = 1.0
        for i in range(degree):
            dense = h[feature_map.permutations[b, i]].to(signs.dtype) * signs[b, i]  # rows P H, columns D
            block = block * (z.to(signs.dtype) @ dense.T)
        blocks.append(block)
    expected = torch.cat(blocks, -1)[:, :num_features] / math.sqrt(num_features)
    torch.testing.assert_close(feature_map(x), expected)
    # Every block uses a permutation of the Hadamard rows.
    assert torch.equal(feature_map.permutations.sort(-1).values, torch.arange(d).expand_as(feature_map.permutations))


@pytest.mark.parametrize("degree", (1, 2, 3))
@pytest.mark.parametrize("bias", (0.0, BIAS))
def test_tensorsketch_matches_circular_convolution_of_count_sketches(degree, bias):
    num_features = 5
    feature_map = _sketch(DIM, num_features, degree, sketch="tensorsketch", bias=bias, seed=6)
    x = _unit_rows(3, DIM, seed=4, nonnegative=False)
    z = feature_map.augment(x).numpy()
    expected = np.zeros((3, num_features))
    expected[:, 0] = 1.0  # the identity of circular convolution
    for i in range(degree):
        count = np.zeros((feature_map.sketch_dim, num_features))
        count[np.arange(feature_map.sketch_dim), feature_map.hashes[i].numpy()] = feature_map.signs[i].numpy()
        sketch = z @ count
        # (a * b)[m] = sum_j a[j] b[(m - j) mod F]
        expected = np.stack(
            [
                sum(expected[:, j] * sketch[:, (m - j) % num_features] for j in range(num_features))
                for m in range(num_features)
            ],
            axis=-1,
        )
    torch.testing.assert_close(feature_map(x), torch.as_tensor(expected))
    assert set(feature_map.signs.unique().tolist()) <= {-1.0, 1.0}


# ---------------------------------------------------------------------------------------- exact cases
@pytest.mark.parametrize("is_complex", [False, True], ids=["real", "complex"])
@pytest.mark.parametrize(
    ("dim", "bias", "num_features", "padded_dim"), [(3, 0.0, 8, 4), (4, 0.0, 4, 4), (4, 0.7, 16, 8)]
)
def test_srht_degree_one_is_exact_when_num_features_is_a_multiple_of_the_padded_dim(
    is_complex, dim, bias, num_features, padded_dim
):
    """p = 1, D = m d: the blocks are orthogonal transforms, so k_hat = x.y (+ bias) for every draw."""
    feature_map = _sketch(dim, num_features, 1, sketch="srht", complex=is_complex, bias=bias, batch_shape=(50,), seed=7)
    assert feature_map.padded_dim == padded_dim  # the bias coordinate (4 -> 5) doubles the padding (8)
    x = _unit_rows(6, dim, seed=8, nonnegative=False)
    y = _unit_rows(6, dim, seed=9, nonnegative=False)
    estimates = _estimates(feature_map, x, y)
    exact = (x * y).sum(-1) + bias
    torch.testing.assert_close(estimates.real, exact.expand(50, -1), rtol=0, atol=1e-12)
    if is_complex:
        torch.testing.assert_close(estimates.imag, torch.zeros(50, 6, dtype=torch.float64), rtol=0, atol=1e-12)
    for part in ("real", "total"):
        variance = feature_map.variance(x, y, part=part)
        torch.testing.assert_close(variance, torch.zeros(6, dtype=torch.float64), rtol=0, atol=1e-12)
    # One feature fewer (a partial block) and the estimate is random again.
    partial = _sketch(dim, num_features - 1, 1, sketch="srht", complex=is_complex, bias=bias, seed=7)
    assert bool((partial.variance(x, y) > 1e-6).all())


@pytest.mark.parametrize("dim", (1, 3, 16))
def test_gaussian_variance_for_equal_unit_vectors(dim):
    """x = y unit vectors: real Gaussian (3^p - 1)/D, complex Gaussian (2^p - 1)/D, for p = 1..9."""
    x = _unit_rows(4, dim, seed=10, nonnegative=False)
    for degree in range(1, 10):
        real = _sketch(dim, 12, degree, sketch="gaussian", seed=0)
        complex_ = _sketch(dim, 12, degree, sketch="gaussian", complex=True, seed=0)
        ones = torch.ones(4, dtype=torch.float64)
        torch.testing.assert_close(real.variance(x, x), (3**degree - 1) / 12 * ones)
        torch.testing.assert_close(real.variance(x, x, part="total"), (3**degree - 1) / 12 * ones)
        torch.testing.assert_close(complex_.variance(x, x, part="total"), (2**degree - 1) / 12 * ones)
        # For x = y the estimate |phi(x)|^2 is real: Var Re = E|.|^2.
        torch.testing.assert_close(complex_.variance(x, x, part="real"), (2**degree - 1) / 12 * ones)


@pytest.mark.parametrize("degree", (1, 2, 3))
@pytest.mark.parametrize("is_complex", [False, True], ids=["real", "complex"])
def test_gaussian_equal_unit_vectors_monte_carlo(is_complex, degree):
    """The (x, x) pair of the Monte-Carlo grid agrees with (3^p - 1)/D and (2^p - 1)/D."""
    for data in DATA:
        feature_map, x, y, estimates = _draws(
            "gaussian", is_complex, degree, data, 0.0, _seed("gaussian", is_complex, degree, data, 0.0)
        )
        assert torch.equal(x[-1], y[-1])
        num_features = feature_map.num_features
        target = ((2 if is_complex else 3) ** degree - 1) / num_features
        error = (estimates[:, -1] - 1.0).abs().square()  # |k_hat - 1|^2 (k = 1)
        ok, z = _mean_check(error.unsqueeze(-1), torch.tensor([target], dtype=torch.float64))
        assert bool(ok.all()), z
        if is_complex:
            # phi(x) . conj(phi(x)) = |phi(x)|^2 is real.
            assert bool((estimates[:, -1].imag == 0).all())


# ---------------------------------------------------------------------------------------- contract
def _inputs(*shape: int, dim: int = DIM, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(*shape, dim, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def _build(case: tuple[str, bool], degree: int = 2, num_features: int = 6, **kwargs) -> PolynomialSketch:
    sketch, is_complex = case
    kwargs.setdefault("seed", 0)
    return _sketch(DIM, num_features, degree, sketch=sketch, complex=is_complex, **kwargs)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_attributes(case):
    feature_map = _build(case, batch_shape=(2,), bias=0.5)
    assert isinstance(feature_map, FeatureMap)
    assert feature_map.input_dim == DIM and feature_map.num_features == 6 and feature_map.degree == 2
    assert feature_map.is_complex is case[1]
    assert feature_map.root_dim == (12 if case[1] else 6)
    assert feature_map.batch_shape == torch.Size([2])
    assert feature_map.sketch_dim == DIM + 1 and feature_map.bias == 0.5
    assert f"sketch={case[0]!r}" in repr(feature_map) and f"complex={case[1]}" in repr(feature_map)
    assert list(feature_map.parameters()) == []
    for value in random_buffers(feature_map).values():
        assert value.shape[:1] == (2,)  # buffers carry the batch shape


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize(
    ("batch_shape", "input_batch", "output_batch"),
    [
        ((), (), ()),
        ((), (2, 3), (2, 3)),
        ((4,), (), (4,)),
        ((4,), (2, 4), (2, 4)),
        ((4,), (2, 1), (2, 4)),
        ((2, 3), (3,), (2, 3)),
    ],
)
def test_output_shapes(case, batch_shape, input_batch, output_batch):
    feature_map = _build(case, batch_shape=batch_shape)
    x = _inputs(*input_batch, 5)
    out = feature_map(x)
    assert out.shape == (*output_batch, 5, 6)
    assert out.dtype == (torch.complex128 if case[1] else torch.float64)
    real = feature_map.real_features(x)
    assert real.shape == (*output_batch, 5, feature_map.root_dim) and real.dtype == torch.float64
    if case[1]:
        assert torch.equal(real, torch.cat([out.real, out.imag], -1))
    else:
        assert torch.equal(real, out)
    # R R^T = Re(Phi Phi^H).
    torch.testing.assert_close(real @ real.mT, (out @ out.mH).real if case[1] else out @ out.mT)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_batched_inputs_match_batch_members(case):
    feature_map = _build(case, batch_shape=(3,), degree=3)
    x = _inputs(2, 3, 4)
    out = feature_map(x)
    for j in range(3):
        member = feature_map.batch_index((j,))
        for i in range(2):
            torch.testing.assert_close(out[i, j], member(x[i, j]))


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_closed_form_shapes(case):
    feature_map = _build(case, batch_shape=(3,), bias=1.0)
    x, y = _inputs(2, 5, seed=1), _inputs(2, 5, seed=2)
    torch.testing.assert_close(feature_map.expected_kernel(x, y), ((x * y).sum(-1) + 1.0).square())
    if case[0] != "tensorsketch":
        for part in ("real", "total"):
            assert feature_map.variance(x, y, part=part).shape == (2, 5)
        if not case[1]:
            assert torch.equal(feature_map.variance(x, y, part="real"), feature_map.variance(x, y, part="total"))


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_degree_zero_is_the_constant_kernel(case):
    feature_map = _build(case, degree=0, batch_shape=(3,), bias=0.3)
    x, y = _inputs(5, seed=1), _inputs(2, 1, 5, seed=2)
    out = feature_map(x)
    assert out.shape == (3, 5, 6) and not out.is_complex()
    torch.testing.assert_close(out, torch.full((3, 5, 6), 6**-0.5, dtype=torch.float64))
    torch.testing.assert_close(_estimates(feature_map, x, x), torch.ones(3, 5, dtype=torch.float64))
    assert feature_map(y).shape == (2, 3, 5, 6)  # batch broadcasting
    torch.testing.assert_close(feature_map.expected_kernel(x, x), torch.ones(5, dtype=torch.float64))
    if case[0] != "tensorsketch":
        assert torch.equal(feature_map.variance(x, x), torch.zeros(5, dtype=torch.float64))
    assert feature_map.real_features(x).shape == (3, 5, 6)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_to_float32_keeps_draws(case):
    feature_map = _build(case, degree=3, batch_shape=(2,))
    x = _inputs(6)
    expected = feature_map(x)
    converted = feature_map.to(torch.float32)
    for value in random_buffers(converted).values():
        assert value.dtype in (torch.float32, torch.int64)
    if case[1]:
        # Complex draws are stored as real (..., 2) tensors: the imaginary parts survive .to(float32).
        name = "weights" if case[0] != "srht" else "signs"
        assert getattr(converted, name).shape[-1] == 2 and bool(getattr(converted, name)[..., 1].abs().sum() > 0)
    out = converted(x.float())
    assert out.dtype == (torch.complex64 if case[1] else torch.float32)
    torch.testing.assert_close(out, expected.to(out.dtype), rtol=1e-4, atol=1e-5)
    back = converted.to(torch.float64)
    torch.testing.assert_close(back(x), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_device(case, device, dtype):
    feature_map = _build(case, degree=2, batch_shape=(2,), dtype=dtype)
    x = _inputs(5, dtype=dtype)
    expected = feature_map(x)
    moved = feature_map.to(device)
    for value in random_buffers(moved).values():
        assert value.device.type == device.type
    out = moved(x.to(device))
    assert out.device.type == device.type
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-5)
    if case[0] != "tensorsketch":
        y = _inputs(5, seed=3, dtype=dtype).to(device)
        assert moved.variance(x.to(device), y).device.type == device.type


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_state_dict_round_trip_into_fresh_map(case):
    feature_map = _build(case, batch_shape=(2,), seed=1, bias=0.5)
    fresh = _build(case, batch_shape=(2,), seed=2, bias=0.5)
    x = _inputs(6)
    assert not torch.allclose(fresh(x), feature_map(x))
    fresh.load_state_dict(feature_map.state_dict())
    assert torch.equal(fresh(x), feature_map(x))


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_pickle_and_deepcopy(case):
    feature_map = _build(case, batch_shape=(2,), seed=3)
    x = _inputs(5)
    expected = feature_map(x)
    for clone in (pickle.loads(pickle.dumps(feature_map)), copy.deepcopy(feature_map)):
        assert torch.equal(clone(x), expected)
        for name, value in random_buffers(clone).items():
            assert value.data_ptr() != getattr(feature_map, name).data_ptr()
        assert clone.batch_shape == feature_map.batch_shape and clone.sketch == feature_map.sketch


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_seed_and_resample(case):
    x = _inputs(6)
    assert torch.equal(_build(case, seed=10)(x), _build(case, seed=10)(x))
    assert not torch.allclose(_build(case, seed=10)(x), _build(case, seed=11)(x))
    original = check_resample(lambda **kwargs: _build(case, **kwargs), x)
    # Batch members are different draws.
    assert not torch.allclose(original[0], original[1])


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_draws_do_not_depend_on_the_default_dtype(case):
    # Regression: TensorSRHT permutations came from torch.rand in the default dtype, so the same seed
    # gave different permutations for float32 and float64 models.
    low, high = _build(case, seed=4, dtype=torch.float32), _build(case, seed=4, dtype=torch.float64)
    for name, value in random_buffers(high).items():
        assert torch.equal(getattr(low, name), value.to(getattr(low, name).dtype)), name


def test_seeded_construction_does_not_touch_global_rng():
    state = torch.random.get_rng_state()
    for case in CASES:
        _build(case, seed=3).resample(torch.Generator().manual_seed(4))
    assert torch.equal(torch.random.get_rng_state(), state)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("bias", (0.0, 0.5))
def test_gradcheck_wrt_input(case, bias):
    feature_map = _build(case, degree=3, num_features=5, batch_shape=(2,), bias=bias)
    x = _inputs(3, seed=1).requires_grad_(True)
    y = _inputs(3, seed=2)
    if case[1]:
        # The real-part kernel Re(phi(x) phi(y)^H), and the real root.
        assert torch.autograd.gradcheck(lambda t: (feature_map(t) @ feature_map(y).mH).real, (x,))
        assert torch.autograd.gradcheck(feature_map.real_features, (x,))
    else:
        assert torch.autograd.gradcheck(feature_map, (x,))


# ---------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("degree", [-1, 2.5, True, "2", None])
def test_degree_must_be_a_non_negative_integer(degree):
    with pytest.raises(ValueError, match="degree"):
        PolynomialSketch(DIM, 4, degree, seed=0)


def test_numpy_integer_degree_is_accepted():
    assert PolynomialSketch(DIM, 4, np.int64(2), seed=0).degree == 2


@pytest.mark.parametrize("num_features", [0, -3, 2.0, True])
def test_num_features_must_be_a_positive_integer(num_features):
    with pytest.raises(ValueError, match="num_features"):
        PolynomialSketch(DIM, num_features, 2, seed=0)


def test_unknown_sketch_lists_valid_choices():
    with pytest.raises(ValueError, match="sketch") as info:
        PolynomialSketch(DIM, 4, 2, sketch="countsketch", seed=0)
    for name in SKETCHES:
        assert repr(name) in str(info.value)


def test_complex_tensorsketch_is_unsupported():
    with pytest.raises(ValueError, match="complex TensorSketch is not supported"):
        PolynomialSketch(DIM, 4, 2, sketch="tensorsketch", complex=True, seed=0)


@pytest.mark.parametrize("bias", [-0.1, float("nan"), float("inf"), True, "1"])
def test_bias_must_be_finite_and_non_negative(bias):
    with pytest.raises(ValueError, match="bias"):
        PolynomialSketch(DIM, 4, 2, bias=bias, seed=0)


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_wrong_input_dimension_is_rejected(case):
    feature_map = _build(case, bias=0.5)
    with pytest.raises(ValueError, match="input dimension 3 but got inputs with 4 columns"):
        feature_map(torch.zeros(2, DIM + 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="shape"):
        feature_map(torch.zeros(DIM, dtype=torch.float64))


@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
def test_float64_inputs_into_float32_draws_are_computed_in_float64(case):
    feature_map = _build(case).to(torch.float32)
    x = torch.randn(2, DIM, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    promoted = feature_map(x)
    assert promoted.dtype in (torch.float64, torch.complex128)
    torch.testing.assert_close(promoted, copy.deepcopy(feature_map).double()(x), rtol=0, atol=0)


def test_non_finite_input_is_rejected():
    x = torch.zeros(2, DIM, dtype=torch.float64)
    x[0, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinite"):
        _build(("srht", True))(x)


def test_unknown_variance_part_is_rejected():
    x = _inputs(2)
    with pytest.raises(ValueError, match="part"):
        _build(("gaussian", True)).variance(x, x, part="imag")


# ---------------------------------------------------------------------------------------- nested draws
@pytest.mark.parametrize("sketch", ["gaussian", "rademacher", "srht"])
@pytest.mark.parametrize("complex_", [False, True])
def test_resized_sketches_hold_the_leading_columns(sketch, complex_):
    feature_map = _sketch(3, 40, 3, sketch, complex=complex_, bias=0.5, batch_shape=(2,), seed=1)
    small, large = feature_map.resized(7), feature_map.resized(150)
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    # Features are the product projections divided by sqrt(F): the leading columns, renormalised, bit for bit
    # up to the one rounding of the scaling.
    scaled = feature_map(x) * math.sqrt(40)
    torch.testing.assert_close(small(x) * math.sqrt(7), scaled[..., :7], rtol=1e-15, atol=1e-14)
    torch.testing.assert_close(large(x)[..., :40] * math.sqrt(150), scaled, rtol=1e-15, atol=1e-14)
    if sketch == "srht":  # whole blocks of 4 columns
        assert torch.equal(small.signs, feature_map.signs[:, :2]) and torch.equal(
            large.signs[:, :10], feature_map.signs
        )
    else:
        assert torch.equal(small.weights, feature_map.weights[:, :, :, :7])
        assert torch.equal(large.weights[:, :, :, :40], feature_map.weights)


def test_tensorsketch_cannot_be_resized():
    with pytest.raises(NotImplementedError, match="TensorSketch hashes the inputs into num_features buckets.*srht"):
        PolynomialSketch(3, 16, 2, "tensorsketch", seed=0).resized(8)
