r"""Optimized allocation of Maclaurin features over degrees (Wacker et al. 2024, §5, Alg. 2–3, App. C).

A dot-product kernel :math:`k(x, y) = \text{pref}(x, y)\sum_n a_n (x^\top y)^n` (``pref`` is
:math:`e^{-\lVert x\rVert^2/2}e^{-\lVert y\rVert^2/2}` for the Gaussian kernel, 1 otherwise) is approximated
by a constant feature :math:`\sqrt{a_0}` plus, for every degree :math:`n \le m`, an independent degree-:math:`n`
sketch with :math:`D_n` features scaled by :math:`\sqrt{a_n}`. On a data sample the expected squared error
splits into a truncation bias :math:`B(m)` and a variance :math:`\sum_n a_n^2 t_n(D_n)`:

* :math:`B(m)` = mean over all pairs :math:`(i, j)` of :math:`(k_{ij} - \text{pref}_{ij}\sum_{n\le m} a_n c_{ij}^n)^2`;
* :math:`V_n` = mean over pairs :math:`i < j` of :math:`\text{pref}^2` times the single-feature variance of the
  degree-:math:`n` sketch (the real-part variance for complex sketches), so a block of :math:`D_n` iid
  features has variance :math:`V_n/D_n`;
* TensorSRHT adds within-block covariances :math:`C_n` (mean of :math:`\text{pref}^2` times the bracket of
  Theorems 5/10); with :math:`P_n` ordered pairs inside blocks, :math:`t_n = V_n/D_n + P_nC_n/D_n^2` when
  :math:`D_n \le d` and :math:`C_n \le 0`, else the convex surrogate :math:`(V_n + (d-1)C_n)/D_n` (App. C),
  which equals the exact value whenever :math:`D_n` is a multiple of :math:`d`. Here :math:`d` is the
  input dimension padded to a power of two. For degree 1 the cost vanishes at :math:`D_1 = d`, so degree 1
  saturates at :math:`d` features (a degree-1 TensorSRHT block reproduces :math:`x^\top y` exactly).

The incremental algorithm starts every truncation :math:`m \in [\text{min\_degree}, \text{max\_degree}]` at
:math:`D_n = 1` and gives the remaining features one at a time to the degree whose cost drops most (ties to the
higher degree; if none drops, to degree 1); the truncation with the lowest cost :math:`+\,B(m)` wins. The pair
statistics are computed once and reused for every truncation.

Reference: J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal of
Machine Learning Research, 2024 (arXiv:2201.08712).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from gprf._checks import check_choice
from gprf.features.sketch_variance import sketch_variance, srht_pair_count


@dataclass(frozen=True)
class MaclaurinAllocation:
    """Result of :func:`optimize_maclaurin_allocation`."""

    counts: list[int]  # D_1..D_m (constant feature excluded)
    variance: float  # expected variance sum_n a_n^2 t_n(D_n) on the sample
    squared_bias: float  # B(m) on the sample


@dataclass(frozen=True)
class _DegreeStatistics:
    variance: Tensor  # V_n, n = 1..max_degree
    correction: Tensor | None  # C_n for TensorSRHT
    squared_bias: Tensor  # B(m), m = 0..max_degree


def _pair_moments(x: Tensor, kernel_name: str, coefficients: Tensor, sketch: str, is_complex: bool, padded_dim: int):
    """Per-degree variance and SRHT statistics, and the truncation biases, on the sample ``x``."""
    n_points = x.size(0)
    rows, cols = torch.triu_indices(n_points, n_points, offset=1)
    max_degree = coefficients.numel() - 1
    sq_norms = x.square().sum(-1)
    gram = x @ x.mT
    if kernel_name == "gaussian":
        log_pref = -0.5 * (sq_norms[:, None] + sq_norms[None, :])
        pref = log_pref.exp()
        target = (log_pref + gram).exp()
    elif kernel_name == "exponential":
        # The exact kernel, not its expansion up to max_degree (which would make B(max_degree) = 0).
        pref = torch.ones_like(gram)
        target = gram.exp()
    else:  # polynomial: the expansion up to the degree is exact
        pref = torch.ones_like(gram)
        target = sum(coefficients[n] * gram.pow(n) for n in range(max_degree + 1))

    # Truncation biases over all pairs (i, j), for every truncation m = 0..max_degree.
    partial = torch.zeros_like(gram)
    biases = []
    for n in range(max_degree + 1):
        partial = partial + coefficients[n] * gram.pow(n)
        biases.append((target - pref * partial).square().mean())
    squared_bias = torch.stack(biases)

    # Variance statistics over pairs i < j; c, N and S from n x n products instead of per-pair gathers.
    squares = x.square()
    c = gram[rows, cols]
    big_n = sq_norms[rows] * sq_norms[cols]
    s = (squares @ squares.mT)[rows, cols]
    pref_sq = pref[rows, cols].square()
    variance = torch.stack(
        [
            (
                pref_sq
                * sketch_variance("rademacher" if sketch == "srht" else sketch, is_complex, "real", c, big_n, s, n, 1)
            ).mean()
            for n in range(1, max_degree + 1)
        ]
    )
    correction = None
    if sketch == "srht":
        # C_n: the SRHT term of the single-block variance with P/D^2 factored out (D = 2, P = 2 gives P/D^2 = 1/2).
        correction = torch.stack(
            [
                (
                    pref_sq
                    * 2
                    * (
                        sketch_variance("srht", is_complex, "real", c, big_n, s, n, 2, padded_dim)
                        - sketch_variance("rademacher", is_complex, "real", c, big_n, s, n, 2)
                    )
                ).mean()
                for n in range(1, max_degree + 1)
            ]
        )
    return _DegreeStatistics(variance, correction, squared_bias)


def _degree_cost(count: int, variance: float, correction: float | None, padded_dim: int) -> float:
    """t_n(D_n): expected variance of a block of ``count`` features of one degree (times a_n^2 outside)."""
    if correction is None:
        return variance / count
    if count <= padded_dim and correction <= 0:
        return variance / count + srht_pair_count(count, padded_dim) * correction / count**2
    return (variance + (padded_dim - 1) * correction) / count


def _greedy(
    budget: int, weights: list[float], stats: _DegreeStatistics, truncation: int, padded_dim: int
) -> tuple[list[int], float]:
    variances = stats.variance.tolist()
    corrections = stats.correction.tolist() if stats.correction is not None else [None] * len(variances)

    def cost(n: int, count: int) -> float:  # n is 1-based
        return weights[n] * _degree_cost(count, variances[n - 1], corrections[n - 1], padded_dim)

    # Degrees with a_n = 0 (e.g. a polynomial kernel without bias) contribute nothing: no features.
    active = [n for n in range(1, truncation + 1) if weights[n] > 0]
    counts = [1 if n in active else 0 for n in range(1, truncation + 1)]
    current = [cost(n, 1) if n in active else 0.0 for n in range(1, truncation + 1)]
    fallback = active[0]  # "none improves": the lowest useful degree (degree 1 unless a_1 = 0)
    for _ in range(budget - len(active)):
        best, best_gain, best_cost = fallback, 0.0, None
        for n in active:
            new_cost = cost(n, counts[n - 1] + 1)
            gain = current[n - 1] - new_cost
            if gain > 0 and gain >= best_gain:  # ">=": ties go to the higher degree
                best, best_gain, best_cost = n, gain, new_cost
        counts[best - 1] += 1
        current[best - 1] = best_cost if best_cost is not None else cost(best, counts[best - 1])
    return counts, sum(current)


def allocate_from_coefficients(
    x: Tensor,
    num_features: int,
    coefficients: Tensor,
    kernel: str,
    sketch: str,
    is_complex: bool,
    min_degree: int,
    max_degree: int,
) -> MaclaurinAllocation:
    """:func:`optimize_maclaurin_allocation` for explicit Maclaurin coefficients :math:`a_0..a_{max}`."""
    x = x.detach().to(torch.float64)
    padded_dim = max(2, 1 << (x.size(-1) - 1).bit_length())
    budget = num_features - 1
    max_degree = min(max_degree, coefficients.numel() - 1)
    min_degree = min(min_degree, max_degree)
    useful = sum(float(a) > 0 for a in coefficients[1 : min_degree + 1])
    if budget < useful:
        raise ValueError(
            f"num_features={num_features} is too small: the constant feature plus one feature per degree up to "
            f"min_degree={min_degree} needs num_features >= {useful + 1}."
        )
    coefficients = coefficients.to(torch.float64)[: max_degree + 1]
    stats = _pair_moments(x, kernel, coefficients, sketch, is_complex, padded_dim)
    weights = coefficients.square().tolist()
    best = None
    for truncation in range(min_degree, max_degree + 1):
        if sum(w > 0 for w in weights[1 : truncation + 1]) > budget or not any(weights[1 : truncation + 1]):
            continue
        counts, variance = _greedy(budget, weights, stats, truncation, padded_dim)
        score = variance + stats.squared_bias[truncation].item()
        if best is None or score < best[0]:
            best = (score, counts, variance, stats.squared_bias[truncation].item())
    _, counts, variance, squared_bias = best
    return MaclaurinAllocation(counts, variance, squared_bias)


MACLAURIN_KERNELS = ("exponential", "polynomial", "gaussian")
MACLAURIN_SKETCHES = ("rademacher", "gaussian", "srht")


def resolve_maclaurin_arguments(
    kernel: str, sketch: str, degree: int | None, bias: float | None
) -> tuple[str, str, int | None, float | None]:
    """Validate the kernel description; the polynomial kernel needs ``degree`` and defaults to ``bias=1``."""
    check_choice(kernel, "kernel", MACLAURIN_KERNELS)
    check_choice(sketch, "sketch", MACLAURIN_SKETCHES)
    if kernel == "polynomial":
        if degree is None:
            raise ValueError("kernel='polynomial' needs degree=p for (x^T y + bias)^p.")
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
            raise ValueError(f"degree must be a positive integer, got {degree!r}.")
        bias = 1.0 if bias is None else float(bias)
        if not math.isfinite(bias) or bias < 0:
            raise ValueError(f"bias must be a finite number >= 0, got {bias!r}.")
    elif degree is not None or bias is not None:
        raise ValueError(f"degree and bias only apply to kernel='polynomial', not {kernel!r}.")
    return kernel, sketch, degree, bias


def maclaurin_coefficients(kernel: str, degree: int | None, bias: float | None, max_degree: int) -> Tensor:
    """:math:`a_0..a_{max}`: :math:`1/n!` (exponential, Gaussian) or :math:`\binom{p}{n}c^{p-n}` (polynomial)."""
    if kernel == "polynomial":
        return torch.tensor(
            [math.comb(degree, n) * bias ** (degree - n) for n in range(degree + 1)], dtype=torch.float64
        )
    return torch.tensor([1.0 / math.factorial(n) for n in range(max_degree + 1)], dtype=torch.float64)


def optimize_maclaurin_allocation(
    x: Tensor,
    num_features: int,
    kernel: str = "exponential",
    sketch: str = "rademacher",
    complex: bool = False,
    degree: int | None = None,
    bias: float | None = None,
    min_degree: int = 2,
    max_degree: int = 10,
) -> MaclaurinAllocation:
    """The allocation ``[D_1, ..., D_m]`` minimising expected variance plus squared truncation bias on ``x``.

    ``x`` is used exactly as given: already divided by the lengthscale and, for the Gaussian kernel,
    already centred (this function neither scales nor centres). Returns the per-degree counts (the constant
    feature excluded, so they sum to ``num_features - 1``), the expected variance and the squared bias on
    the sample. Computed in float64 (deterministic). See the module docstring for the algorithm; argument
    checking and defaults as in :class:`~gprf.features.MaclaurinFeatures`.
    """
    kernel, sketch, degree, bias = resolve_maclaurin_arguments(kernel, sketch, degree, bias)
    coefficients = maclaurin_coefficients(kernel, degree, bias, max_degree)
    return allocate_from_coefficients(x, num_features, coefficients, kernel, sketch, complex, min_degree, max_degree)
