r"""Statistical and contract tests of MaclaurinFeatures (DESIGN.md §3.4).

Monte-Carlo checks accept with a z-score bound ``|estimate - target| <= Z * SE``, SE from the draws
themselves (means) or from the fourth central moment (variances); with Z = 5 a correct implementation
fails one check with probability below 6e-7. Every statistic is also shown to reject a wrong answer.

* Random Maclaurin (Kar & Karnick): 2000 independently seeded maps, so the degrees are redrawn per map;
  unbiased for the expansion truncated at ``max_degree`` (``None``: the full kernel).
* Fixed and optimized allocations: ``batch_shape=(2000,)`` gives 2000 independent draws of every
  per-degree sketch for one allocation; unbiased for the truncated expansion, with the closed-form
  variance (sum over the independent degrees).
"""

from __future__ import annotations

import copy
import functools
import math
import pickle

import pytest
import torch
from sklearn.datasets import load_digits

from gprf.features import MaclaurinFeatures
from gprf.metrics import relative_frobenius_error
from gprf.testing import build_in

pytestmark = pytest.mark.usefixtures("single_thread")

Z = 5.0
NUM_DRAWS = 2000
DIM = 3


def _maclaurin(*args, **kwargs) -> MaclaurinFeatures:
    return build_in(torch.float64, MaclaurinFeatures, *args, **kwargs)


def _points(n: int, dim: int, scale: float, seed: int, shift: float = 0.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, dim, generator=generator, dtype=torch.float64) * scale + shift


# Pairs with |x|, |y| ~ 0.3 - 1.2 (every degree up to ~4 matters) and one identical pair.
_X, _Y = _points(5, DIM, 0.55, seed=0), _points(5, DIM, 0.55, seed=1)
_Y[0] = _X[0]
PAIRS = (_X, _Y)


def _estimates(feature_map: MaclaurinFeatures, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Complex estimate phi(x) . conj(phi(y)) row by row (real for real maps)."""
    return (feature_map(x) * feature_map(y).conj()).sum(-1)


def _mean_within(draws: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    se = draws.std(dim=0) / math.sqrt(draws.size(0))
    return (draws.mean(dim=0) - target).abs() <= Z * se


def _variance_within(draws: torch.Tensor, closed_form: torch.Tensor) -> torch.Tensor:
    """Sample variance against the closed form; SE from the fourth central moment, Var(s^2) ~ (mu4 - s^4)/n."""
    n = draws.size(0)
    centred = draws - draws.mean(0)
    sample_var = centred.square().sum(0) / (n - 1)
    se = ((centred.pow(4).mean(0) - sample_var.square()) / n).sqrt()
    return (sample_var - closed_form).abs() <= Z * se


# ---------------------------------------------------------------------------------------- random Maclaurin
RANDOM_CASES = [
    ("exponential", "rademacher", False, 10),
    ("exponential", "gaussian", True, 10),
    ("gaussian", "srht", False, 10),
    ("gaussian", "rademacher", True, 6),
    ("polynomial", "gaussian", False, None),
    ("polynomial", "rademacher", True, None),
    ("exponential", "rademacher", False, None),  # unbounded degrees: the full kernel
]


def _kernel_args(kernel: str) -> dict:
    return {"degree": 3, "bias": 0.5} if kernel == "polynomial" else {}


@functools.cache
def _random_draws(
    kernel: str, sketch: str, is_complex: bool, max_degree: int | None
) -> tuple[torch.Tensor, MaclaurinFeatures]:
    """Real-part estimates of NUM_DRAWS independently seeded random-Maclaurin maps with F = 4."""
    seed0 = 10_000 * (1 + RANDOM_CASES.index((kernel, sketch, is_complex, max_degree)))
    draws, allocations = [], set()
    both, n = torch.cat(PAIRS), len(PAIRS[0])
    for i in range(NUM_DRAWS):
        feature_map = _maclaurin(
            DIM,
            4,
            kernel=kernel,
            sketch=sketch,
            complex=is_complex,
            allocation="random",
            max_degree=max_degree,
            seed=seed0 + i,
            **_kernel_args(kernel),
        )
        allocations.add(tuple(feature_map.counts))
        phi = feature_map(both)  # one call for x and y: the maps are tiny, per-call overhead dominates
        draws.append((phi[:n] * phi[n:].conj()).sum(-1).real)
    # The degrees are redrawn per map: many different allocations occur.
    assert len(allocations) >= (3 if kernel == "polynomial" else 6), allocations
    return torch.stack(draws), feature_map


@pytest.mark.parametrize(("kernel", "sketch", "is_complex", "max_degree"), RANDOM_CASES)
def test_random_maclaurin_is_unbiased_for_the_truncated_expansion(kernel, sketch, is_complex, max_degree):
    draws, feature_map = _random_draws(kernel, sketch, is_complex, max_degree)
    x, y = PAIRS
    target = feature_map.expected_kernel(x, y)
    c = (x * y).sum(-1)
    if kernel == "polynomial":
        torch.testing.assert_close(target, (c + 0.5) ** 3)  # the expansion up to p is the kernel
    elif max_degree is None:
        torch.testing.assert_close(target, c.exp())  # unbounded degrees: the full exponential kernel
    else:
        pref = torch.exp(-0.5 * (x.square().sum(-1) + y.square().sum(-1))) if kernel == "gaussian" else 1.0
        truncated = pref * sum(c.pow(n) / math.factorial(n) for n in range(max_degree + 1))
        torch.testing.assert_close(target, truncated)
    assert bool(_mean_within(draws, target).all()), (draws.mean(0), target, draws.std(0) / math.sqrt(NUM_DRAWS))


@pytest.mark.parametrize(("kernel", "sketch", "is_complex", "max_degree"), [RANDOM_CASES[0], RANDOM_CASES[4]])
def test_random_maclaurin_unbiasedness_check_has_power(kernel, sketch, is_complex, max_degree):
    draws, feature_map = _random_draws(kernel, sketch, is_complex, max_degree)
    x, y = PAIRS
    assert not bool(_mean_within(draws, feature_map.expected_kernel(1.25 * x, y)).all())


def test_random_maclaurin_truncation_is_visible():
    """Truncated at degree 1 the estimate is unbiased for 1 + x^T y and detectably biased for exp(x^T y)."""
    x, y = 2.0 * PAIRS[0], 2.0 * PAIRS[1]
    draws = torch.stack(
        [_estimates(_maclaurin(DIM, 4, allocation="random", max_degree=1, seed=500 + i), x, y) for i in range(400)]
    )
    c = (x * y).sum(-1)
    assert bool(_mean_within(draws, 1 + c).all())
    assert not bool(_mean_within(draws, c.exp()).all())


def test_random_degree_law():
    """Degrees follow p(n) ∝ 2^-(n+1) on the support (chi-square-free check: z bounds on the counts)."""
    feature_map = _maclaurin(DIM, 20001, allocation="random", max_degree=3, seed=7)
    counts = torch.tensor(feature_map.counts, dtype=torch.float64)
    p = torch.tensor([4.0, 2.0, 1.0]) / 7
    expected = 20000 * p
    assert bool(((counts - expected).abs() <= Z * (20000 * p * (1 - p)).sqrt()).all()), counts
    unbounded = _maclaurin(DIM, 20001, allocation="random", max_degree=None, seed=8)
    counts = torch.tensor(unbounded.counts[:4], dtype=torch.float64)
    p = torch.tensor([2.0**-n for n in range(1, 5)])
    assert bool(((counts - 20000 * p).abs() <= Z * (20000 * p * (1 - p)).sqrt()).all()), counts
    # Polynomial kernels draw only degrees with a_n > 0: bias 0 leaves degree p alone.
    homogeneous = _maclaurin(DIM, 50, kernel="polynomial", degree=3, bias=0.0, allocation="random", seed=9)
    assert homogeneous.counts == [0, 0, 49]


def test_random_maclaurin_has_no_closed_form_variance():
    feature_map = _maclaurin(DIM, 10, allocation="random", seed=0)
    with pytest.raises(NotImplementedError, match="random"):
        feature_map.variance(*PAIRS)


# ---------------------------------------------------------------------------------------- fixed / optimized
FIXED_CASES = [(sketch, is_complex) for sketch in ("rademacher", "gaussian", "srht") for is_complex in (False, True)]
POLYNOMIAL_ALLOCATION = [6, 0, 9]  # degree 2 left out on purpose: E k_hat is then not the kernel


@functools.cache
def _fixed_map(kernel: str, sketch: str, is_complex: bool) -> MaclaurinFeatures:
    seed = 20_000 + 10 * FIXED_CASES.index((sketch, is_complex)) + (kernel == "polynomial")
    if kernel == "polynomial":
        return _maclaurin(
            DIM,
            1 + sum(POLYNOMIAL_ALLOCATION),
            kernel="polynomial",
            degree=3,
            bias=0.5,
            sketch=sketch,
            complex=is_complex,
            allocation=POLYNOMIAL_ALLOCATION,
            batch_shape=(NUM_DRAWS,),
            seed=seed,
        )
    # Gaussian kernel, optimized on a sample away from the origin: the centre is non-zero.
    feature_map = _maclaurin(
        DIM, 24, kernel="gaussian", sketch=sketch, complex=is_complex, batch_shape=(NUM_DRAWS,), seed=seed
    )
    feature_map.fit_allocation(_points(40, DIM, 0.5, seed=3, shift=0.4))
    return feature_map


def _fixed_case_pairs(kernel: str) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = PAIRS
    return (x + 0.4, y + 0.4) if kernel == "gaussian" else PAIRS


@pytest.mark.parametrize("kernel", ["gaussian", "polynomial"])
@pytest.mark.parametrize(("sketch", "is_complex"), FIXED_CASES)
def test_fixed_allocation_mean_and_variance(kernel, sketch, is_complex):
    feature_map = _fixed_map(kernel, sketch, is_complex)
    x, y = _fixed_case_pairs(kernel)
    estimates = _estimates(feature_map, x, y)
    assert estimates.shape == (NUM_DRAWS, len(x))
    target = feature_map.expected_kernel(x, y)
    # The target is the expansion truncated to the allocated degrees.
    z1, z2 = x - feature_map.center, y - feature_map.center
    c = (z1 * z2).sum(-1)
    if kernel == "gaussian":
        assert feature_map.center.abs().min() > 0.2  # fit_allocation set the sample mean
        counts = feature_map.counts
        assert all(count > 0 for count in counts)
        if sketch == "srht":
            assert max(counts) > 4  # more than one TensorSRHT block (d = 3 padded to 4)
        pref = torch.exp(-0.5 * (z1.square().sum(-1) + z2.square().sum(-1)))
        expected = pref * sum(c.pow(n) / math.factorial(n) for n in range(len(counts) + 1))
    else:
        expected = 0.5**3 + 3 * 0.5**2 * c + c.pow(3)  # a_0, a_1, a_3 of (c + 0.5)^3, no degree 2
    torch.testing.assert_close(target, expected)

    real = estimates.real
    assert bool(_mean_within(real, target).all()), (real.mean(0), target)
    assert not bool(_mean_within(real, feature_map.expected_kernel(1.1 * x, y)).all())  # power

    closed_form = feature_map.variance(x, y)
    assert closed_form.shape == (len(x),)
    assert bool(_variance_within(real, closed_form).all()), (real.var(0), closed_form)
    assert not bool(_variance_within(real, closed_form / 2).all())  # power
    if is_complex:
        # E|k_hat - k|^2 (imaginary part included): a mean of non-negative draws.
        total = feature_map.variance(x, y, part="total")
        squared_errors = (estimates - target).abs().square()
        assert bool(_mean_within(squared_errors, total).all()), (squared_errors.mean(0), total)
        assert not bool(_mean_within(squared_errors, closed_form).all())  # "total" differs from "real"
    else:
        torch.testing.assert_close(feature_map.variance(x, y, part="total"), closed_form)


def test_variance_is_the_sum_over_degrees():
    """Closed form: pref^2 sum_n a_n Var_n (each degree an independent sketch scaled by sqrt(a_n))."""
    allocation = [3, 5, 2]
    feature_map = _maclaurin(DIM, 11, kernel="gaussian", sketch="rademacher", allocation=allocation, seed=0)
    x, y = PAIRS
    c = (x * y).sum(-1)
    n_ = x.square().sum(-1) * y.square().sum(-1)
    s = (x.square() * y.square()).sum(-1)
    pref = torch.exp(-0.5 * (x.square().sum(-1) + y.square().sum(-1)))
    expected = pref.square() * sum(
        (1 / math.factorial(n)) ** 2 * ((n_ + 2 * c.square() - 2 * s).pow(n) - c.pow(2 * n)) / count
        for n, count in enumerate(allocation, start=1)
    )
    torch.testing.assert_close(feature_map.variance(x, y), expected)
    with pytest.raises(ValueError, match="part"):
        feature_map.variance(x, y, part="imag")


# ---------------------------------------------------------------------------------------- digits
@functools.cache
def _unit_digits(num_points: int) -> torch.Tensor:
    x = torch.as_tensor(load_digits().data[:num_points], dtype=torch.float64)
    return x / x.norm(dim=-1, keepdim=True)


# Seeds per degree: enough for an expected Welch z of ~9 on the log errors (measured: 0.85, 1.2 and
# 1.05 times sqrt(seeds) for p = 3, 7, 10), i.e. far above Z = 5.
NUM_SEEDS = {3: 120, 7: 60, 10: 80}


@pytest.mark.parametrize("degree", [3, 7, 10])
def test_optimized_beats_random_maclaurin_on_digits(degree):
    """(x^T y + 1)^p on 300 unit-norm digits, F = 256, TensorSRHT: relative Frobenius error of the Gram matrix.

    Optimized: one allocation fitted on the same data, independent draws of its sketches (batch_shape).
    Random: independently seeded maps (the degrees redrawn per map). Random Maclaurin's errors are
    right-skewed (a draw with many high-degree features is far off), so the Welch statistic is computed
    on log errors, where both samples are close to normal; the arithmetic means are compared as well.
    Measured: mean errors 0.097 vs 0.137 (p = 3, optimized [64, 121, 70]), 0.36 vs 0.95 (p = 7,
    [8, 37, 83, 127]), 0.57 vs 1.82 (p = 10, [3, 18, 64, 170]); Welch z on the logs 8.1, 8.9, 9.4.
    """
    seeds = NUM_SEEDS[degree]
    x = _unit_digits(300)
    exact = (x @ x.mT + 1) ** degree
    optimized = _maclaurin(
        64, 256, kernel="polynomial", degree=degree, sketch="srht", batch_shape=(seeds,), seed=degree
    )
    optimized.fit_allocation(x)
    features = optimized(x)
    optimized_errors = relative_frobenius_error(features @ features.mT, exact)
    random_errors = []
    for i in range(seeds):
        random_map = _maclaurin(
            64, 256, kernel="polynomial", degree=degree, sketch="srht", allocation="random", seed=1000 * degree + i
        )
        features = random_map(x)
        random_errors.append(relative_frobenius_error(features @ features.mT, exact))
    random_errors = torch.stack(random_errors)
    assert optimized_errors.mean() < random_errors.mean(), (optimized_errors.mean(), random_errors.mean())
    better, worse = optimized_errors.log(), random_errors.log()
    se = (better.var() / seeds + worse.var() / seeds).sqrt()
    z = (worse.mean() - better.mean()) / se
    assert z > Z, (optimized_errors.mean(), random_errors.mean(), z)


# ---------------------------------------------------------------------------------------- contract
@pytest.mark.parametrize("is_complex", [False, True])
@pytest.mark.parametrize("kernel", ["exponential", "gaussian", "polynomial"])
def test_shapes_and_constant_feature(kernel, is_complex):
    args = _kernel_args(kernel)
    feature_map = _maclaurin(4, 17, kernel=kernel, complex=is_complex, allocation=[8, 5, 3], seed=0, **args)
    x = _points(6, 4, 0.5, seed=1)
    phi = feature_map(x)
    assert phi.shape == (6, 17)
    assert phi.dtype == (torch.complex128 if is_complex else torch.float64)
    assert feature_map.real_features(x).shape == (6, 34 if is_complex else 17)
    assert feature_map.root_dim == (34 if is_complex else 17)
    a0 = 0.5**3 if kernel == "polynomial" else 1.0
    pref = torch.exp(-0.5 * x.square().sum(-1)) if kernel == "gaussian" else torch.ones(6, dtype=torch.float64)
    torch.testing.assert_close(phi[:, 0], (math.sqrt(a0) * pref).to(phi.dtype))
    # Batched inputs.
    xb = _points(2 * 3 * 6, 4, 0.5, seed=2).reshape(2, 3, 6, 4)
    phib = feature_map(xb)
    assert phib.shape == (2, 3, 6, 17)
    torch.testing.assert_close(phib[1, 2], feature_map(xb[1, 2]))


@pytest.mark.parametrize("allocation", ["optimized", "random", [4, 4, 3]])
def test_batch_shape_and_batch_index_expand(allocation):
    feature_map = _maclaurin(3, 12, kernel="gaussian", allocation=allocation, batch_shape=(3,), seed=0)
    x = _points(5, 3, 0.5, seed=1)
    phi = feature_map(x)
    assert phi.shape == (3, 5, 12)
    assert not torch.allclose(phi[0], phi[1])  # independent sketches per batch member
    torch.testing.assert_close(feature_map.batch_index((1,))(x), phi[1])
    assert feature_map.batch_index((1,)).batch_shape == torch.Size()
    # Inputs with their own batch broadcast against the map's batch.
    assert feature_map(x.expand(2, 1, 5, 3)).shape == (2, 3, 5, 12)
    single = _maclaurin(3, 12, kernel="gaussian", allocation=allocation, seed=0)
    expanded = single.batch_expand(torch.Size([4]))
    assert expanded.batch_shape == torch.Size([4])
    phi_e = expanded(x)
    assert phi_e.shape == (4, 5, 12)
    torch.testing.assert_close(phi_e[3], single(x))


def test_gaussian_features_are_damped_exponential_features_of_centred_inputs():
    allocation = [6, 4, 2]
    gaussian = _maclaurin(3, 13, kernel="gaussian", allocation=allocation, seed=5)
    exponential = _maclaurin(3, 13, kernel="exponential", allocation=allocation, seed=5)
    gaussian.center = torch.tensor([0.3, -0.2, 0.5], dtype=torch.float64)
    x = _points(7, 3, 0.6, seed=1)
    z = x - gaussian.center
    torch.testing.assert_close(gaussian(x), exponential(z) * torch.exp(-0.5 * z.square().sum(-1, keepdim=True)))
    # The dot-product kernels are never centred.
    exponential.center = torch.ones(3, dtype=torch.float64)
    fresh = _maclaurin(3, 13, kernel="exponential", allocation=allocation, seed=5)
    torch.testing.assert_close(exponential(x), fresh(x))


def test_gaussian_fit_allocation_sets_the_centre():
    x = _points(30, 3, 0.5, seed=2, shift=1.0)
    feature_map = _maclaurin(3, 40, kernel="gaussian", seed=0)
    result = feature_map.fit_allocation(x)
    torch.testing.assert_close(feature_map.center, x.mean(0))
    assert feature_map.counts == result.counts and sum(result.counts) == 39
    assert [s.degree for s in feature_map.sketches] == list(range(1, len(result.counts) + 1))
    # Exponential maps are optimized on the raw sample and keep a zero centre.
    exponential = _maclaurin(3, 40, kernel="exponential", seed=0)
    exponential.fit_allocation(x)
    assert bool((exponential.center == 0).all())


def test_default_allocation_before_fitting():
    # Until fitted, the budget is split evenly over degrees 1..min_degree.
    assert _maclaurin(3, 10).counts == [5, 4]
    assert _maclaurin(3, 11, min_degree=3).counts == [4, 3, 3]
    assert _maclaurin(3, 11, kernel="polynomial", degree=2, min_degree=4).counts == [5, 5]


@pytest.mark.parametrize("is_complex", [False, True])
def test_to_float32(is_complex):
    feature_map = _maclaurin(3, 12, kernel="gaussian", sketch="srht", complex=is_complex, allocation=[4, 4, 3], seed=0)
    x = _points(5, 3, 0.5, seed=1)
    feature_map.center = torch.full((3,), 0.1, dtype=torch.float64)
    reference = feature_map(x)
    feature_map = feature_map.to(torch.float32)
    assert feature_map.center.dtype == torch.float32
    phi = feature_map(x.float())
    assert phi.dtype == (torch.complex64 if is_complex else torch.float32)
    torch.testing.assert_close(phi, reference.to(phi.dtype), rtol=1e-5, atol=1e-6)
    # Rebuilding (resample, fit_allocation) keeps the dtype.
    feature_map.resample(torch.Generator().manual_seed(1))
    assert feature_map(x.float()).dtype == phi.dtype
    promoted = feature_map(x)  # float64 inputs: computed in the promoted dtype, the draws stay float32
    assert promoted.dtype == (torch.complex128 if is_complex else torch.float64)
    assert feature_map.center.dtype == torch.float32
    torch.testing.assert_close(promoted, copy.deepcopy(feature_map).double()(x), rtol=0, atol=0)


@pytest.mark.parametrize("allocation", ["optimized", "random", [5, 0, 6]])
@pytest.mark.parametrize("is_complex", [False, True])
def test_state_dict_into_a_fresh_map_rebuilds_the_allocation(allocation, is_complex):
    """A fresh map with its default allocation (another seed) loads a trained map's state: the stored
    allocation rebuilds the per-degree sketches first, then the draws and the centre load."""
    x = _points(20, 3, 0.5, seed=1, shift=0.3)
    common = dict(kernel="gaussian", sketch="srht", complex=is_complex)
    if allocation == "optimized":
        trained = _maclaurin(3, 60, **common, seed=3)
        trained.fit_allocation(x)
    else:
        trained = _maclaurin(3, 12, **common, allocation=allocation, seed=3)
    # Fixed allocations load into the default (optimized-mode) map; random Maclaurin into a random map.
    mode = "random" if allocation == "random" else "optimized"
    fresh = _maclaurin(3, trained.num_features, **common, allocation=mode, seed=99)
    assert fresh.counts != trained.counts
    fresh.load_state_dict(trained.state_dict())
    assert fresh.counts == trained.counts
    torch.testing.assert_close(fresh.center, trained.center)
    torch.testing.assert_close(fresh(x), trained(x), rtol=0, atol=0)
    if allocation != "random":
        torch.testing.assert_close(fresh.variance(x, x.flip(0)), trained.variance(x, x.flip(0)))


def test_random_state_into_an_optimized_map_keeps_its_scaling():
    """The per-degree scales are a buffer, so the random-degree rescaling travels with the state."""
    x = _points(5, 3, 0.5, seed=1)
    trained = _maclaurin(3, 12, allocation="random", seed=1)
    fresh = _maclaurin(3, 12, seed=2)
    try:
        fresh.load_state_dict(trained.state_dict())
    except (RuntimeError, ValueError):
        return  # a loud error is an acceptable fix
    torch.testing.assert_close(fresh(x), trained(x))


def test_pickle_and_deepcopy():
    feature_map = _maclaurin(3, 12, kernel="gaussian", complex=True, allocation="random", seed=2)
    feature_map.center = torch.full((3,), 0.2, dtype=torch.float64)
    x = _points(5, 3, 0.5, seed=1)
    for clone in (pickle.loads(pickle.dumps(feature_map)), copy.deepcopy(feature_map)):
        assert clone.counts == feature_map.counts
        torch.testing.assert_close(clone(x), feature_map(x), rtol=0, atol=0)


def test_resample():
    x = _points(5, 3, 0.5, seed=1)
    # Seeded maps are reproducible; resample() without a generator redraws the construction draws.
    a = _maclaurin(3, 30, allocation="random", seed=4)
    b = _maclaurin(3, 30, allocation="random", seed=4)
    torch.testing.assert_close(a(x), b(x), rtol=0, atol=0)
    before, counts = a(x), a.counts
    version = a.draw_version
    a.resample(torch.Generator().manual_seed(1))
    b.resample(torch.Generator().manual_seed(1))
    assert a.draw_version > version
    torch.testing.assert_close(a(x), b(x), rtol=0, atol=0)
    assert not torch.allclose(a(x), before)
    # Random Maclaurin redraws the degrees.
    redrawn = []
    for seed in range(5):
        a.resample(torch.Generator().manual_seed(100 + seed))
        redrawn.append(a.counts)
        assert sum(a.counts) == 29
    assert any(c != counts for c in redrawn)
    a.resample()
    assert a.counts == counts
    torch.testing.assert_close(a(x), before, rtol=0, atol=0)
    # Fixed and optimized allocations keep their counts and redraw the sketches.
    fixed = _maclaurin(3, 12, allocation=[5, 4, 2], seed=0)
    before = fixed(x)
    fixed.resample(torch.Generator().manual_seed(2))
    assert fixed.counts == [5, 4, 2]
    assert not torch.allclose(fixed(x), before)


@pytest.mark.parametrize(
    ("kernel", "sketch", "is_complex"),
    [("gaussian", "srht", False), ("exponential", "rademacher", True), ("polynomial", "gaussian", False)],
)
def test_gradcheck_inputs(kernel, sketch, is_complex):
    feature_map = _maclaurin(
        3, 9, kernel=kernel, sketch=sketch, complex=is_complex, allocation=[3, 3, 2], seed=0, **_kernel_args(kernel)
    )
    x = _points(4, 3, 0.5, seed=1).requires_grad_(True)
    assert torch.autograd.gradcheck(feature_map.real_features, (x,))


def test_device(device):
    feature_map = _maclaurin(3, 12, kernel="gaussian", sketch="srht", complex=True, allocation=[4, 4, 3], seed=0).to(
        device
    )
    x = _points(5, 3, 0.5, seed=1)
    phi = feature_map(x.to(device))
    assert phi.device.type == device.type
    torch.testing.assert_close(phi.cpu(), feature_map.cpu()(x))
    feature_map = _maclaurin(3, 20, kernel="gaussian", sketch="srht", seed=0).to(device)
    feature_map.fit_allocation(x.to(device))
    assert feature_map.center.device.type == device.type
    assert feature_map.allocation.device.type == device.type
    assert feature_map(x.to(device)).device.type == device.type


def test_extra_repr():
    text = repr(_maclaurin(3, 12, kernel="gaussian", allocation=[5, 4, 2], seed=0))
    assert "kernel='gaussian'" in text and "[5, 4, 2]" in text


# ---------------------------------------------------------------------------------------- bad input
def test_bad_input():
    with pytest.raises(ValueError, match="'exponential', 'polynomial', 'gaussian'"):
        MaclaurinFeatures(3, 10, kernel="rbf")
    with pytest.raises(ValueError, match="'rademacher', 'gaussian', 'srht'"):
        MaclaurinFeatures(3, 10, sketch="tensorsketch")
    with pytest.raises(ValueError, match="'optimized', 'random'"):
        MaclaurinFeatures(3, 10, allocation="greedy")
    with pytest.raises(ValueError, match="needs degree"):
        MaclaurinFeatures(3, 10, kernel="polynomial")
    with pytest.raises(ValueError, match="degree must be a positive integer"):
        MaclaurinFeatures(3, 10, kernel="polynomial", degree=0)
    with pytest.raises(ValueError, match="only apply to kernel='polynomial'"):
        MaclaurinFeatures(3, 10, kernel="gaussian", degree=2)
    with pytest.raises(ValueError, match="only apply to kernel='polynomial'"):
        MaclaurinFeatures(3, 10, kernel="exponential", bias=1.0)
    with pytest.raises(ValueError, match="bias"):
        MaclaurinFeatures(3, 10, kernel="polynomial", degree=2, bias=-1.0)
    with pytest.raises(ValueError, match="num_features >= 3"):
        MaclaurinFeatures(3, 2)
    with pytest.raises(ValueError, match="num_features >= 5"):
        MaclaurinFeatures(3, 4, min_degree=4)
    with pytest.raises(ValueError, match="num_features must be >= 2"):
        MaclaurinFeatures(3, 1, allocation="random")
    with pytest.raises(ValueError, match=r"num_features - 1 = 9 .*sum 10"):
        MaclaurinFeatures(3, 10, allocation=[5, 5])
    with pytest.raises(ValueError, match="non-negative"):
        MaclaurinFeatures(3, 10, allocation=[-1, 10])
    with pytest.raises(ValueError, match="non-negative"):
        MaclaurinFeatures(3, 10, allocation=[4.5, 4.5])
    with pytest.raises(ValueError, match="above the polynomial degree 2"):
        MaclaurinFeatures(3, 10, kernel="polynomial", degree=2, allocation=[3, 3, 3])
    with pytest.raises(ValueError, match="max_degree=None"):
        MaclaurinFeatures(3, 10, max_degree=None)
    with pytest.raises(ValueError, match="fit_allocation needs allocation='optimized'"):
        MaclaurinFeatures(3, 10, allocation="random").fit_allocation(torch.randn(5, 3))
    with pytest.raises(ValueError, match="fit_allocation needs allocation='optimized'"):
        MaclaurinFeatures(3, 10, allocation=[5, 4]).fit_allocation(torch.randn(5, 3))
    with pytest.raises(ValueError, match=r"shape \(n, 3\)"):
        MaclaurinFeatures(3, 10).fit_allocation(torch.randn(5, 4))
    with pytest.raises(ValueError, match="input dimension 3"):
        MaclaurinFeatures(3, 10)(torch.randn(5, 4))
