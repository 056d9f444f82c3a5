r"""How many random features a GP needs for :math:`N` points in :math:`d` dimensions, and a warning for loops that
refit oversized models.

:func:`gprf.suggest_num_features` gives

.. math::
    F = \mathrm{clip}\big(2N,\; 32\,d,\; 64\,d\big), \text{ rounded up to an even number,}

* **at least** :math:`32\,d`: the Monte Carlo error of a random-feature kernel entry falls like :math:`1/\sqrt F`
  (for Fourier features of a stationary kernel its variance is at most :math:`(1 + k(2\delta))/F \le 2/F`), so the
  floor keeps it below :math:`1/\sqrt{16\,d}` whatever the number of points (10% at :math:`d = 6`);
* **twice the points** in between: with :math:`F \ge N` the :math:`N\times N` Gram :math:`\Phi\Phi^\top` of the
  training points can have full rank (with fewer columns than points it has rank :math:`F < N`, and the approximate
  GP cannot fit targets outside an :math:`F`-dimensional space, which the exact GP can), and the factor two keeps
  the extra features' share of the Monte Carlo error small against the Gram's own; the points route
  (:func:`gprf.linalg.choose_route`) then costs :math:`O(N^2F) = O(N^3)`, the exact GP's order;
* **at most** :math:`64\,d`: beyond the cap, the features route costs :math:`O(NF^2)`, far below the exact GP's
  :math:`O(N^3)` at thousands of points, and the error per entry is already below :math:`1/\sqrt{32\,d}`.

The constants are the defaults of the function's arguments; the closed-loop Bayesian-optimisation benchmark
(``python -m benchmarks --what small-bo``) compares models sized by the rule with the exact GP.

A model refitted at every iteration of a loop with far more features than the rule asks for (e.g. the 1024 features
that ``RandomFeatureSingleTaskGP`` took by default before the rule, at 40 points) pays for them at every fit and
acquisition:
:class:`RefitMonitor` warns once (:class:`~gprf.exceptions.OversizedFeaturesWarning`) when a second such model is
trained, whatever the model class (a plain ``SingleTaskGP`` with a gprf kernel too).
"""

from __future__ import annotations

import math
import threading
import warnings
import weakref

from gprf.exceptions import OversizedFeaturesWarning

#: The defaults of :func:`gprf.suggest_num_features`: features per training point, and per input dimension at least
#: and at most.
POINTS_RATIO = 2.0
MIN_PER_DIM = 32
MAX_PER_DIM = 64
#: A fit is oversized when its features exceed this multiple of the larger of the rule's number and the points.
OVERSIZE_FACTOR = 2


def _check_count(value: object, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer of at least {low}, got {value!r}.")
    return value


def suggest_num_features(
    num_points: int,
    num_dims: int,
    *,
    points_ratio: float = POINTS_RATIO,
    min_per_dim: int = MIN_PER_DIM,
    max_per_dim: int = MAX_PER_DIM,
) -> int:
    r"""The number of real features :math:`F = \mathrm{clip}(\text{points_ratio}\cdot N,\ \text{min_per_dim}\cdot d,\
    \text{max_per_dim}\cdot d)`, rounded up to an even number (module docstring: why).

    Args:
        num_points: :math:`N`, the training points (0 allowed: the floor).
        num_dims: :math:`d`, the input dimension the kernel sees (after input transforms), at least 1.
        points_ratio: Features per point between the floor and the cap (positive).
        min_per_dim, max_per_dim: The floor and the cap per input dimension (``1 <= min_per_dim <= max_per_dim``).

    Example:
        >>> gprf.suggest_num_features(40, 6)
        192
    """
    _check_count(num_points, "num_points", 0)
    _check_count(num_dims, "num_dims", 1)
    _check_count(min_per_dim, "min_per_dim", 1)
    _check_count(max_per_dim, "max_per_dim", min_per_dim)
    if isinstance(points_ratio, bool) or not isinstance(points_ratio, int | float) or not points_ratio > 0:
        raise ValueError(f"points_ratio must be a positive number, got {points_ratio!r}.")
    features = min(max(math.ceil(points_ratio * num_points), min_per_dim * num_dims), max_per_dim * num_dims)
    return features + features % 2


def is_oversized(num_points: int, num_features: int, num_dims: int) -> bool:
    """Whether ``num_features`` exceed :data:`OVERSIZE_FACTOR` times the larger of the rule's number and the points."""
    return num_features > OVERSIZE_FACTOR * max(num_points, suggest_num_features(num_points, num_dims))


class RefitMonitor:
    """Counts the oversized kernels (:func:`is_oversized`) evaluated for training, and warns once, at the second: one
    model may be a one-off, two are a loop that builds and refits a model every iteration. gprf's feature kernels
    report each evaluation of their training covariance with gradients (a marginal likelihood's) to
    :data:`REFIT_MONITOR`, whichever model holds them; the kernels are held weakly."""

    def __init__(self) -> None:
        # Weakly held, to count each kernel once while it lives (a loop drops each iteration's model for the next).
        self._seen: weakref.WeakSet = weakref.WeakSet()
        self._count = 0
        self._warned = False
        self._lock = threading.Lock()

    def note_fit(self, kernel: object, num_points: int, num_features: int, num_dims: int) -> None:
        """Record a training evaluation of ``kernel`` with ``num_features`` features on ``num_points`` points in
        ``num_dims`` dimensions."""
        if self._warned or not is_oversized(num_points, num_features, num_dims):
            return
        with self._lock:
            if kernel not in self._seen:
                self._seen.add(kernel)
                self._count += 1
            warn = self._count == 2 and not self._warned
            self._warned = self._warned or warn
        if warn:
            self._seen.clear()
            suggested = suggest_num_features(num_points, num_dims)
            warnings.warn(
                f"A second model with {num_features} random features on {num_points} points in {num_dims} "
                f"dimension(s) is being trained: in a loop that refits every iteration, every fit and acquisition pays "
                f"for features that {num_points} points do not need. gprf.suggest_num_features({num_points}, "
                f"{num_dims}) = {suggested}; RandomFeatureSingleTaskGP(..., num_features='auto') sizes its kernel so "
                "at every iteration. (Shown once.)",
                OversizedFeaturesWarning,
                stacklevel=4,
            )


#: The process-wide monitor gprf's models report their fits to.
REFIT_MONITOR = RefitMonitor()
