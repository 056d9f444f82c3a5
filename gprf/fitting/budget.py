r"""The time budget of :func:`gprf.fit_mll`: its clock, and the cost of the exact refit from timed probes.

The exact refit at :math:`F` features on :math:`N` rows forms the features and their Gram matrix
:math:`\Phi^\top\Phi` in row chunks, eigendecomposes it (:class:`~gprf.fitting.ScaleStatistics`) and factors the
prediction capacitance :math:`I + (s/\sigma^2)\Phi^\top\Phi` that it hands to the model
(:mod:`gprf.fitting.handover`):

.. math::
    T_\text{refit}(N, F) = c_G\,NF^2 + c_E\,F^3.

:func:`probe_refit_cost` measures :math:`c_G` and :math:`c_E` on the model's device when the fit starts, by running
those very steps on a slice of the problem (:data:`PROBE_ROWS` rows, nested prefixes of at most
:data:`PROBE_FEATURES` features) after an untimed run at a smaller size (the first call of a BLAS or LAPACK routine
pays its start-up). The Gram's products are compute-bound at any :math:`F` in the thousands, so their rate carries
over to larger :math:`F`. The tridiagonalisation is memory-bound, and on one CPU thread its time per :math:`F^3`
measured 0.26-0.33 ns at every :math:`F` from 1024 to 6144; the Cholesky factorisation gets faster per :math:`F^3`
as :math:`F` grows (0.06 ns at 1024, 0.026 ns at 6144), so the probe overestimates it: the estimate errs on the side
of the budget.

With nested draws every prefix :math:`F' \le F` of the model's draw is itself a valid draw, so the largest
:math:`F'` whose refit fits the time left (:meth:`RefitCost.largest_cap`) is well defined.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter

import torch

from gprf.fitting.scale_statistics import FeatureSums

#: Rows and features (per nested kernel) of the timed probe, and of its untimed warm-up.
PROBE_ROWS, PROBE_FEATURES = 2048, 1024
WARM_UP_ROWS, WARM_UP_FEATURES = 128, 128
#: Caps chosen for the budget are multiples of this many features (Fourier features need even sizes).
PREFIX_GRANULE = 64


@dataclass
class FitClock:
    """Wall clock of a fit that stops while the user's callback runs (so callbacks can evaluate models)."""

    budget: float | None
    callback: Callable[[str, float], None] | None
    start: float = 0.0
    paused: float = 0.0

    def __post_init__(self) -> None:
        self.start = perf_counter()

    @property
    def elapsed(self) -> float:
        return perf_counter() - self.start - self.paused

    def left(self) -> float:
        return math.inf if self.budget is None else self.budget - self.elapsed

    def checkpoint(self, stage: str) -> None:
        if self.callback is not None:
            begin = perf_counter()
            self.callback(stage, self.elapsed)
            self.paused += perf_counter() - begin


@dataclass(frozen=True)
class RefitCost:
    r"""Seconds of the exact refit, :math:`c_G NF^2 + c_E F^3` (module docstring).

    Attributes:
        gram_rate: :math:`c_G`, seconds per :math:`NF^2` (features, Gram matrix and projections).
        cubic_rate: :math:`c_E`, seconds per :math:`F^3` (eigendecomposition and prediction factor).
    """

    gram_rate: float
    cubic_rate: float

    def seconds(self, num_rows: int, num_features: int) -> float:
        return self.gram_rate * num_rows * num_features**2 + self.cubic_rate * num_features**3

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


def probe_refit_cost(
    device: torch.device,
    probe_sums: Callable[[int, int], FeatureSums],
    decompose: Callable[[FeatureSums], object],
) -> RefitCost:
    r"""Time the refit's steps on a slice of the problem (module docstring).

    ``probe_sums(rows, cap)`` forms the sums of the first ``rows`` training rows with the nested kernels capped at
    ``cap`` features; ``decompose(sums)`` runs the :math:`F^3` steps on them. Both run once untimed at
    (:data:`WARM_UP_ROWS`, :data:`WARM_UP_FEATURES`), then timed at (:data:`PROBE_ROWS`, :data:`PROBE_FEATURES`).
    """
    decompose(probe_sums(WARM_UP_ROWS, WARM_UP_FEATURES))
    sums, gram_seconds = _timed(lambda: probe_sums(PROBE_ROWS, PROBE_FEATURES), device)
    _, cubic_seconds = _timed(lambda: decompose(sums), device)
    num_features = sums.gram.size(-1)
    return RefitCost(gram_seconds / (sums.num_data * num_features**2), cubic_seconds / num_features**3)


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
