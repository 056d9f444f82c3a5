r"""The time budget of :func:`gprf.fit_mll`: its clock, and the cost of the exact refit from timed probes.

The exact refit at :math:`F` features on :math:`N` rows forms the features and their Gram matrix
:math:`\Phi^\top\Phi` in row chunks, eigendecomposes it (:class:`~gprf.fitting.ScaleStatistics`) and factors the
prediction capacitance :math:`I + (s/\sigma^2)\Phi^\top\Phi` that it hands to the model
(:mod:`gprf.fitting.handover`):

.. math::
    T_\text{refit}(N, F) = c_G\,NF^2 + c_E\,F^3.

With fewer rows than features the refit works with the :math:`N\times N` Gram :math:`\Phi\Phi^\top` instead (the
points route, :meth:`gprf.fitting.ScaleStatistics.from_points`) and hands nothing to the prediction cache: the same
products and decompositions with :math:`N` and :math:`F` swapped, :math:`c_G\,N^2F + c_E\,N^3`.

:func:`probe_refit_cost` measures :math:`c_G` and :math:`c_E` on the model's device when the fit starts, by running
those very steps on a slice of the problem (an eighth of the rows, nested prefixes of a quarter of the features, at
most :data:`PROBE_ROWS` and :data:`PROBE_FEATURES`) after an untimed run at a smaller size (the first call of a BLAS
or LAPACK routine pays its start-up). The Gram's products are compute-bound at any :math:`F` in the thousands, so
their rate carries over to larger :math:`F`. The probe's :math:`F^3` steps run in the cache, whereas the
tridiagonalisation of a Gram matrix beyond it is bound by memory bandwidth (one thread of a loaded machine measured
0.2 ns per :math:`F^3` at :math:`F = 768` and 0.56 ns at 3072): on the CPU :math:`c_E` is therefore at least the
rate that the bandwidth of matrix-vector products on a matrix of the model's size (up to
:data:`MEMORY_PROBE_SIZE`) implies. The Cholesky factorisation gets faster per :math:`F^3` as :math:`F` grows
(0.06 ns at 1024, 0.026 ns at 6144), so the probe overestimates it. On a machine shared with other work the load,
and with it every rate, varies: the slower of two Gram probes counts.

With nested draws every prefix :math:`F' \le F` of the model's draw is itself a valid draw, so the largest
:math:`F'` whose refit fits the time left (:meth:`RefitCost.largest_cap`) is well defined.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from time import perf_counter

import torch

from gprf.fitting.scale_statistics import FeatureSums

#: Rows and features (per nested kernel) of the timed probe at most. The probe takes at most an eighth of the rows
#: and a quarter of the features, so it costs at most 1/128 of the refit's Gram matrix and 1/64 of its cubic steps.
PROBE_ROWS, PROBE_FEATURES = 2048, 1024
#: Rows and features of the untimed warm-up before the probe (the first call of a BLAS or LAPACK routine pays its
#: start-up).
WARM_UP_ROWS, WARM_UP_FEATURES = 128, 128
#: Size of the float64 matrix (128 MiB, beyond a core's cache) and number of matrix-vector products that measure the
#: memory bandwidth the tridiagonalisation of a large Gram matrix is bound by.
MEMORY_PROBE_SIZE, MEMORY_PROBE_PRODUCTS = 4096, 4
#: Largest matrix whose eigendecomposition times the :math:`F^3` steps on a GPU (not validated on one yet).
ACCELERATOR_CUBIC_PROBE_SIZE = 4096
#: Caps chosen for the budget are multiples of this many features (Fourier features need even sizes).
PREFIX_GRANULE = 64


def process_seconds() -> float:
    """This process's wall clock in seconds (``perf_counter``): the fit's clock when all its rows are here."""
    return perf_counter()


@dataclass
class FitClock:
    """Wall clock of a fit that stops while the user's callback runs (so callbacks can evaluate models).

    ``timer``: the clock's readings in seconds. A fit whose rows are sharded over processes passes its placement's
    (:meth:`gprf.fitting.placement.RowPlacement.now`: one reading for every process), so every process takes the
    same budget decisions.
    """

    budget: float | None
    callback: Callable[[str, float], None] | None
    timer: Callable[[], float] = process_seconds
    start: float = 0.0
    paused: float = 0.0

    def __post_init__(self) -> None:
        self.start = self.now()

    def now(self) -> float:
        return self.timer()

    @property
    def elapsed(self) -> float:
        return self.now() - self.start - self.paused

    def left(self) -> float:
        return math.inf if self.budget is None else self.budget - self.elapsed

    def checkpoint(self, stage: str) -> None:
        if self.callback is not None:
            begin = self.now()
            self.callback(stage, self.elapsed)
            self.paused += self.now() - begin


@dataclass(frozen=True)
class RefitCost:
    r"""Seconds of the exact refit, :math:`c_G NF^2 + c_E F^3`, or :math:`c_G N^2F + c_E N^3` below :math:`F` rows
    (module docstring).

    Attributes:
        gram_rate: :math:`c_G`, seconds per :math:`NF^2` (features, Gram matrix and projections).
        cubic_rate: :math:`c_E`, seconds per :math:`F^3` (eigendecomposition and prediction factor).
    """

    gram_rate: float
    cubic_rate: float

    def seconds(self, num_rows: int, num_features: int) -> float:
        inner = min(num_rows, num_features)  # the points route below F rows (module docstring)
        return self.gram_rate * num_rows * num_features * inner + self.cubic_rate * inner**3

    def slower(self, other: RefitCost) -> RefitCost:
        """The slower of two measurements, rate by rate (the load of a shared machine varies during a fit)."""
        return RefitCost(max(self.gram_rate, other.gram_rate), max(self.cubic_rate, other.cubic_rate))

    def largest_cap(self, num_rows: int, seconds: float, total: Callable[[int], int], largest: int, least: int) -> int:
        """The largest cap :math:`c` of the nested kernels' sizes whose refit, at ``total(c)`` features in all,
        takes at most ``seconds``: ``largest`` (no cut) if that fits, else the largest multiple of
        :data:`PREFIX_GRANULE` above ``least`` that fits, else ``least``.

        ``total`` is non-decreasing in the cap, so the multiples are searched by bisection.
        """
        if self.seconds(num_rows, total(largest)) <= seconds:
            return largest
        best = least
        low, high = least // PREFIX_GRANULE + 1, (largest - 1) // PREFIX_GRANULE  # granules strictly between
        while low <= high:
            middle = (low + high) // 2
            if self.seconds(num_rows, total(middle * PREFIX_GRANULE)) <= seconds:
                best, low = middle * PREFIX_GRANULE, middle + 1
            else:
                high = middle - 1
        return best


def probe_sizes(num_rows: int, largest: int) -> tuple[int, int]:
    """Rows and feature cap of the timed probe: an eighth of ``num_rows`` (at most :data:`PROBE_ROWS`) and a quarter
    of the ``largest`` nested kernel's features (at most :data:`PROBE_FEATURES`), at least the warm-up's."""
    return min(PROBE_ROWS, max(WARM_UP_ROWS, num_rows // 8)), min(PROBE_FEATURES, max(WARM_UP_FEATURES, largest // 4))


def probe_refit_cost(
    device: torch.device,
    form_sums: Callable[[int], FeatureSums],
    decompose: Callable[[FeatureSums], object],
    rows: int,
    block: int,
    total: int,
) -> RefitCost:
    r"""Time the refit's steps on a slice of the problem (module docstring).

    ``form_sums(n)`` forms the sums of the first ``n`` training rows with the features as they are (the caller cuts
    the nested kernels to the probe's cap, :func:`probe_sizes`, outside the timing); ``decompose(sums)`` runs the
    :math:`F^3` steps on them. Both run once untimed on :data:`WARM_UP_ROWS` rows and a leading block of
    :data:`WARM_UP_FEATURES` features, then timed: the sums of ``rows`` rows twice (the slower counts: the load of
    a shared machine varies) and the :math:`F^3` steps on their leading ``block`` features. On the CPU, :math:`c_E`
    is at least the memory-bound rate of a Gram matrix of the model's ``total`` features (timed matrix-vector products
    on a matrix of that size, up to :data:`MEMORY_PROBE_SIZE`); on other devices the :math:`F^3` steps are timed on a
    positive definite matrix of ``total`` features, up to :data:`ACCELERATOR_CUBIC_PROBE_SIZE`.
    """
    decompose(_leading_block(form_sums(WARM_UP_ROWS), WARM_UP_FEATURES))
    timings = [_timed(lambda: form_sums(rows), device) for _ in range(2)]
    sums, gram_seconds = timings[0][0], max(seconds for _, seconds in timings)
    gram_rate = gram_seconds / (sums.num_data * sums.gram.size(-1) ** 2)
    if device.type != "cpu":
        # A GPU's eigendecomposition is bound by latency at the probe's sizes: time it on a matrix of the size of
        # the refit's, up to ACCELERATOR_CUBIC_PROBE_SIZE.
        stand_in = _spd_sums(min(total, ACCELERATOR_CUBIC_PROBE_SIZE), sums.gram)
        _, cubic_seconds = _timed(lambda: decompose(stand_in), device)
        return RefitCost(gram_rate, cubic_seconds / stand_in.gram.size(-1) ** 3)
    leading = _leading_block(sums, block)
    _, cubic_seconds = _timed(lambda: decompose(leading), device)
    memory_rate = _memory_cubic_rate(min(total, MEMORY_PROBE_SIZE), device)
    return RefitCost(gram_rate, max(cubic_seconds / leading.gram.size(-1) ** 3, memory_rate))


def _memory_cubic_rate(size: int, device: torch.device) -> float:
    r"""Seconds per :math:`F^3` of the tridiagonalisation's memory traffic, from the bandwidth of matrix-vector
    products on a ``size`` :math:`\times` ``size`` float64 matrix.

    Householder tridiagonalisation multiplies each trailing :math:`(F-k)\times(F-k)` block by a vector, reading
    :math:`\sum_k (F-k)^2 \approx F^3/3` elements; a Gram matrix beyond the cache is read from memory each time. On
    one CPU thread the tridiagonal route measured 0.25-0.34 times as long as that many elements read by dense
    matrix-vector products (:math:`F = 2048`-4096, under varying load), so :math:`F^3/3` elements at their
    bandwidth bound it from above.
    """
    matrix = torch.ones(size, size, dtype=torch.float64, device=device)
    vector = torch.ones(size, dtype=torch.float64, device=device)
    matrix @ vector  # untimed: the pages are touched once
    _, seconds = _timed(lambda: [matrix @ vector for _ in range(MEMORY_PROBE_PRODUCTS)], device)
    return seconds / (MEMORY_PROBE_PRODUCTS * size**2) / 3


def _spd_sums(size: int, like: torch.Tensor) -> FeatureSums:
    """Sums of ``size`` features whose Gram matrix is a well-conditioned positive definite ``size x size`` matrix
    (dtype and device of ``like``): a stand-in for timing the :math:`F^3` steps."""
    generator = torch.Generator(device=like.device).manual_seed(0)
    factor = torch.randn(size, size, generator=generator, dtype=like.dtype, device=like.device) / size**0.5
    gram = factor @ factor.mT + torch.eye(size, dtype=like.dtype, device=like.device)
    projections = torch.ones(size, 2, dtype=like.dtype, device=like.device)
    ones = torch.ones((), dtype=like.dtype, device=like.device)
    return FeatureSums(gram, projections, residual_square=ones, residual_sum=ones, num_data=size)


def _leading_block(sums: FeatureSums, size: int) -> FeatureSums:
    """The sums of the first ``size`` features (the Gram matrix's leading block)."""
    return replace(sums, gram=sums.gram[..., :size, :size], projections=sums.projections[..., :size, :])


def _timed(work: Callable[[], object], device: torch.device) -> tuple[object, float]:
    """``(work(), seconds)``, the device synchronised before and after."""
    _synchronize(device)
    begin = perf_counter()
    result = work()
    _synchronize(device)
    return result, perf_counter() - begin


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
