r"""The optimized Maclaurin allocation (paper 000 §5, Alg. 2–3, App. C; DESIGN.md §3.4).

* Reference allocations on scikit-learn digits (deterministic, float64).
* Structure of the result: the budget is spent exactly, truncations stay in [min_degree, max_degree],
  polynomial kernels never go above their degree, and TensorSRHT saturates degree 1 at the padded
  dimension (its degree-1 variance vanishes there) while Rademacher does not.
* The returned variance and squared bias agree with an independent computation from the feature map's
  closed-form variance (averaged over pairs i < j) and the truncated expansion (over all pairs).
"""

from __future__ import annotations

import copy
import functools
import math

import pytest
import torch
from sklearn.datasets import load_digits

from gprf.features import MaclaurinAllocation, MaclaurinFeatures, PolynomialSketch, optimize_maclaurin_allocation

pytestmark = pytest.mark.usefixtures("single_thread")


@functools.cache
def _reference_digits() -> tuple[torch.Tensor, float]:
    """DESIGN.md §3.4: standardise over all 1797 rows (ddof 0, constant columns' std set to 1), keep the
    first 1000 rows, divide by the median of the full 1000 x 1000 distance matrix (zeros included)."""
    x = torch.as_tensor(load_digits().data, dtype=torch.float64)
    std = x.std(0, correction=0)
    std[std == 0] = 1.0
    x = ((x - x.mean(0)) / std)[:1000]
    lengthscale = torch.cdist(x, x).median().item()
    return x / lengthscale, lengthscale


def _pairs_upper(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return tuple(torch.triu_indices(n, n, offset=1))


# ---------------------------------------------------------------------------------------- reference
def test_reference_lengthscale():
    _, lengthscale = _reference_digits()
    assert abs(lengthscale - 9.7404) < 1e-3, lengthscale


def test_reference_allocation_rademacher():
    x, _ = _reference_digits()
    result = optimize_maclaurin_allocation(x, 192, kernel="gaussian", sketch="rademacher")
    assert isinstance(result, MaclaurinAllocation)
    assert result.counts == [146, 45]
    # Rademacher has no saturation at d: degree 1 takes far more than d = 64 features.
    assert result.counts[0] > 64


def test_reference_allocation_srht_function_and_feature_map(float64):
    x, _ = _reference_digits()
    result = optimize_maclaurin_allocation(x, 1024, kernel="gaussian", sketch="srht")
    assert result.counts == [64, 648, 185, 74, 52]
    # The map centres the sample at its mean first (the standardised first 1000 rows have mean norm
    # ~0.036 after scaling); the allocation is the same.
    feature_map = MaclaurinFeatures(64, 1024, kernel="gaussian", sketch="srht", seed=0)
    fitted = feature_map.fit_allocation(x)
    assert fitted.counts == feature_map.counts == [64, 648, 185, 74, 52]
    torch.testing.assert_close(feature_map.center, x.mean(0))
    # ... with slightly different statistics (it is a different sample), so the centring did happen.
    assert fitted.variance != result.variance


def test_srht_degree_one_saturates_at_the_padded_dimension():
    """TensorSRHT's degree-1 variance is exactly 0 when D_1 is a multiple of d, so D_1 stops at d."""
    x, _ = _reference_digits()
    x = x[:200]
    for num_features in (256, 1024, 2048):
        counts = optimize_maclaurin_allocation(x, num_features, kernel="gaussian", sketch="srht").counts
        assert counts[0] <= 64, counts
    assert counts[0] == 64
    # Rademacher at the same budget goes far beyond d.
    assert optimize_maclaurin_allocation(x, 2048, kernel="gaussian", sketch="rademacher").counts[0] > 64
    # The reason: the exact degree-1 TensorSRHT variance vanishes at D = d (and is positive below).
    i, j = _pairs_upper(50)
    for num, expected_zero in ((64, True), (63, False)):
        variance = PolynomialSketch(64, num, 1, sketch="srht").double().variance(x[i], x[j])
        assert bool((variance.abs() < 1e-12).all()) == expected_zero


@pytest.mark.parametrize("dim", [3, 5, 8])
@pytest.mark.parametrize("is_complex", [False, True])
def test_srht_degree_one_never_exceeds_padded_dimension(dim, is_complex):
    x = torch.randn(40, dim, generator=torch.Generator().manual_seed(dim), dtype=torch.float64) * 0.4
    padded = max(2, 1 << (dim - 1).bit_length())
    counts = optimize_maclaurin_allocation(x, 400, kernel="exponential", sketch="srht", complex=is_complex).counts
    assert counts[0] <= padded, (counts, padded)
    assert sum(counts) == 399


# ---------------------------------------------------------------------------------------- structure
@pytest.mark.parametrize("sketch", ["rademacher", "gaussian", "srht"])
@pytest.mark.parametrize("kernel", ["gaussian", "exponential"])
@pytest.mark.parametrize("is_complex", [False, True])
def test_budget_and_degree_range(sketch, kernel, is_complex):
    x = torch.randn(30, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 0.8
    for num_features, min_degree, max_degree in ((10, 2, 10), (64, 3, 6), (257, 2, 4), (5, 4, 10)):
        result = optimize_maclaurin_allocation(
            x,
            num_features,
            kernel=kernel,
            sketch=sketch,
            complex=is_complex,
            min_degree=min_degree,
            max_degree=max_degree,
        )
        counts = result.counts
        assert sum(counts) == num_features - 1
        assert min_degree <= len(counts) <= max_degree
        assert all(isinstance(c, int) and c >= 1 for c in counts)  # every degree up to the truncation is used
        assert result.variance >= 0 and result.squared_bias >= 0


def test_larger_inputs_need_higher_degrees():
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(40, 4, generator=generator, dtype=torch.float64)
    truncations = [
        len(optimize_maclaurin_allocation(scale * x, 512, kernel="exponential", max_degree=12).counts)
        for scale in (0.2, 0.6, 1.2)
    ]
    assert truncations == sorted(truncations) and truncations[0] < truncations[-1], truncations


@pytest.mark.parametrize("degree", [1, 2, 3, 7])
@pytest.mark.parametrize("sketch", ["rademacher", "srht"])
def test_polynomial_never_allocates_above_the_degree(degree, sketch, float64):
    x = torch.rand(30, 5, generator=torch.Generator().manual_seed(degree), dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    for num_features in (8, 100, 600):
        counts = optimize_maclaurin_allocation(
            x, num_features, kernel="polynomial", degree=degree, sketch=sketch
        ).counts
        assert len(counts) <= degree and sum(counts) == num_features - 1
    # The feature map agrees, and min_degree is clipped to the degree.
    feature_map = MaclaurinFeatures(5, 64, kernel="polynomial", degree=degree, sketch=sketch, min_degree=5, seed=0)
    assert len(feature_map.counts) == min(degree, 5)
    feature_map.fit_allocation(x)
    assert len(feature_map.counts) <= degree and sum(feature_map.counts) == 63


def test_exact_polynomial_has_no_bias_at_full_truncation():
    x = torch.rand(25, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    result = optimize_maclaurin_allocation(x, 400, kernel="polynomial", degree=3, bias=0.5)
    if len(result.counts) == 3:
        assert result.squared_bias < 1e-20
    # With a homogeneous kernel (bias 0) only degree p has a_p > 0: lower truncations keep the whole bias.
    homogeneous = optimize_maclaurin_allocation(x, 400, kernel="polynomial", degree=2, bias=0.0)
    assert len(homogeneous.counts) == 2 and homogeneous.squared_bias < 1e-20


def test_deterministic_and_float32_input():
    x = torch.randn(30, 4, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * 0.7
    first = optimize_maclaurin_allocation(x, 100, kernel="gaussian", sketch="srht")
    again = optimize_maclaurin_allocation(x.clone(), 100, kernel="gaussian", sketch="srht")
    assert first == again
    # float32 inputs are promoted to float64 (same allocation up to the input rounding).
    single = optimize_maclaurin_allocation(x.float(), 100, kernel="gaussian", sketch="srht")
    assert single.counts == first.counts
    assert math.isclose(single.variance, first.variance, rel_tol=1e-5)


# ---------------------------------------------------------------------------------------- consistency
def _independent_statistics(x, counts, kernel, sketch, is_complex, degree=None, bias=None):
    """Variance of the allocation from MaclaurinFeatures.variance (mean over pairs i < j) and the squared
    truncation bias from the truncated expansion (mean over all pairs i, j)."""
    n, d = x.shape
    feature_map = MaclaurinFeatures(
        d,
        1 + sum(counts),
        kernel=kernel,
        sketch=sketch,
        complex=is_complex,
        allocation=counts,
        degree=degree,
        bias=bias,
        seed=0,
    ).double()
    assert bool((feature_map.center == 0).all())
    i, j = _pairs_upper(n)
    variance = feature_map.variance(x[i], x[j]).mean().item()
    ii, jj = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    ii, jj = ii.flatten(), jj.flatten()
    if kernel == "gaussian":
        exact = torch.exp(-0.5 * (x[ii] - x[jj]).square().sum(-1))
    elif kernel == "exponential":
        exact = torch.exp((x[ii] * x[jj]).sum(-1))
    else:
        exact = ((x[ii] * x[jj]).sum(-1) + bias) ** degree
    squared_bias = (exact - feature_map.expected_kernel(x[ii], x[jj])).square().mean().item()
    return variance, squared_bias


@pytest.mark.parametrize(
    ("kernel", "sketch", "is_complex", "num_features"),
    [
        ("gaussian", "rademacher", False, 40),
        ("gaussian", "rademacher", True, 40),
        ("gaussian", "gaussian", False, 25),
        ("gaussian", "gaussian", True, 60),
        ("exponential", "rademacher", False, 30),
        ("exponential", "gaussian", True, 30),
        ("polynomial", "rademacher", False, 30),
        ("polynomial", "gaussian", True, 20),
    ],
)
def test_returned_variance_and_bias_match_independent_computation(kernel, sketch, is_complex, num_features, float64):
    x = torch.randn(18, 4, generator=torch.Generator().manual_seed(5), dtype=torch.float64) * 0.6
    degree, bias = (3, 0.5) if kernel == "polynomial" else (None, None)
    result = optimize_maclaurin_allocation(
        x,
        num_features,
        kernel=kernel,
        sketch=sketch,
        complex=is_complex,
        degree=degree,
        bias=bias,
        min_degree=2,
        max_degree=8,
    )
    variance, squared_bias = _independent_statistics(x, result.counts, kernel, sketch, is_complex, degree, bias)
    assert math.isclose(result.variance, variance, rel_tol=1e-9), (result.variance, variance)
    assert math.isclose(result.squared_bias, squared_bias, rel_tol=1e-9, abs_tol=1e-25), (
        result.squared_bias,
        squared_bias,
    )


def _srht_within_block(x, dim, degree, is_complex) -> float:
    """C_n / 2 up to the positive factor: mean over pairs of Var_srht(D = 2) - Var_rademacher(D = 2)."""
    i, j = _pairs_upper(x.size(0))
    srht = PolynomialSketch(dim, 2, degree, sketch="srht", complex=is_complex).double().variance(x[i], x[j])
    rademacher = PolynomialSketch(dim, 2, degree, sketch="rademacher", complex=is_complex).double().variance(x[i], x[j])
    return (srht - rademacher).mean().item()


@pytest.mark.parametrize(("dim", "num_features", "scale", "is_complex"), [(16, 30, 0.3, False), (8, 25, 0.4, True)])
def test_srht_variance_is_exact_where_no_surrogate_is_needed(dim, num_features, scale, is_complex, float64):
    """Where every D_n is either <= d with a negative within-block covariance (the exact branch) or a
    multiple of d (where the App. C surrogate is exact), the SRHT cost is the exact variance."""
    x = torch.rand(20, dim, generator=torch.Generator().manual_seed(dim), dtype=torch.float64) * scale
    result = optimize_maclaurin_allocation(x, num_features, kernel="exponential", sketch="srht", complex=is_complex)
    for n, count in enumerate(result.counts, start=1):
        exact_branch = count <= dim and _srht_within_block(x, dim, n, is_complex) <= 0
        assert exact_branch or count % dim == 0, result.counts  # preconditions of this test
    variance, squared_bias = _independent_statistics(x, result.counts, "exponential", "srht", is_complex)
    assert math.isclose(result.variance, variance, rel_tol=1e-9), (result.variance, variance)
    assert math.isclose(result.squared_bias, squared_bias, rel_tol=1e-9)


def test_srht_surrogate_is_a_lower_bound_beyond_one_block(float64):
    """Above d features and with C_n < 0 the convex surrogate (V + (d-1)C)/D of App. C is below the exact
    V/D + P C/D^2 (P/D^2 <= (d-1)/D, with equality at multiples of d)."""
    dim = 16
    x = torch.rand(20, dim, generator=torch.Generator().manual_seed(7), dtype=torch.float64) * 0.3
    result = optimize_maclaurin_allocation(x, 40, kernel="exponential", sketch="srht", complex=True)
    assert any(count > dim and count % dim for count in result.counts), result.counts
    assert all(_srht_within_block(x, dim, n, True) < 0 for n in range(1, len(result.counts) + 1))
    variance, _ = _independent_statistics(x, result.counts, "exponential", "srht", True)
    assert result.variance < variance


# ---------------------------------------------------------------------------------------- bad input
def test_bad_input():
    x = torch.randn(10, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="'exponential', 'polynomial', 'gaussian'"):
        optimize_maclaurin_allocation(x, 20, kernel="rbf")
    with pytest.raises(ValueError, match="'rademacher', 'gaussian', 'srht'"):
        optimize_maclaurin_allocation(x, 20, sketch="tensorsketch")
    with pytest.raises(ValueError, match="needs degree"):
        optimize_maclaurin_allocation(x, 20, kernel="polynomial")
    with pytest.raises(ValueError, match="only apply to kernel='polynomial'"):
        optimize_maclaurin_allocation(x, 20, kernel="gaussian", degree=2)
    with pytest.raises(ValueError, match="num_features >= 4"):
        optimize_maclaurin_allocation(x, 3, min_degree=3)


def test_exponential_bias_is_measured_against_the_exact_kernel():
    """Regression: B(m) of the exponential kernel compares with exp(x^T y), not with its expansion up to
    max_degree (which made B(max_degree) = 0 and hid the truncation error of large inputs)."""
    x = torch.randn(18, 4, generator=torch.Generator().manual_seed(6), dtype=torch.float64) * 1.5
    result = optimize_maclaurin_allocation(x, 300, kernel="exponential", max_degree=10)
    gram = x @ x.mT
    truncated = sum(gram.pow(n) / math.factorial(n) for n in range(len(result.counts) + 1))
    expected = (gram.exp() - truncated).square().mean().item()
    assert expected > 1.0
    assert math.isclose(result.squared_bias, expected, rel_tol=1e-9), (result.squared_bias, expected)


def test_degrees_with_zero_coefficients_get_no_features():
    """(x^T y)^2 without bias has a_1 = 0: degree 1 would only add all-zero columns."""
    x = torch.randn(40, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64) / 3
    provisional = MaclaurinFeatures(3, 10, kernel="polynomial", degree=2, bias=0.0, seed=0)
    assert provisional.counts == [0, 9]
    assert optimize_maclaurin_allocation(x, 10, kernel="polynomial", degree=2, bias=0.0).counts == [0, 9]


def test_float64_inputs_into_float32_draws_are_computed_in_float64():
    features = MaclaurinFeatures(3, 10, allocation=[5, 4], seed=0).float()
    x = torch.randn(2, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64) / 3
    torch.testing.assert_close(features(x), copy.deepcopy(features).double()(x), rtol=0, atol=0)


def test_fit_allocation_subsamples_the_pair_statistics():
    x = torch.randn(300, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64) / 2
    features = MaclaurinFeatures(3, 40, kernel="gaussian", seed=0).double()
    features.fit_allocation(x, max_samples=100)
    torch.testing.assert_close(features.center, x.mean(0))  # the centre uses every row
    rows = torch.randperm(300, generator=torch.Generator().manual_seed(0))[:100]
    expected = optimize_maclaurin_allocation((x - x.mean(0))[rows], 40, kernel="gaussian")
    assert features.counts == expected.counts
