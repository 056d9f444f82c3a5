r"""Monte-Carlo checks of random-feature estimates against their closed forms, with bounds that follow from the
variance instead of loose tolerances.

A random-feature estimate :math:`\hat k` averaged over :math:`S` independent draws has the standard error
:math:`\sqrt{\mathrm{Var}\,\hat k / S}`; the z-score :math:`z = (\bar k - E\hat k)/\sqrt{\mathrm{Var}\,\hat k / S}` is
close to a standard normal. :func:`~gprf.testing.z_bound` is the two-sided bound that ``num_checks`` such scores of a
correct implementation all stay within, except with probability ``false_alarm`` (Bonferroni); with fixed seeds a check
then either always passes or always fails.
"""

from __future__ import annotations

from statistics import NormalDist

import torch
from torch import Tensor


def z_bound(num_checks: int, false_alarm: float = 1e-6) -> float:
    r"""The bound :math:`b` with :math:`P(\max_i |z_i| > b) \le` ``false_alarm`` for ``num_checks`` standard normal
    z-scores: :math:`b = \Phi^{-1}(1 - \alpha / (2m))` (e.g. 5.23 for six checks at :math:`10^{-6}`)."""
    if isinstance(num_checks, bool) or not isinstance(num_checks, int) or num_checks < 1:
        raise ValueError(f"num_checks must be a positive int, got {num_checks!r}.")
    if not 0 < false_alarm < 1:
        raise ValueError(f"false_alarm must be a probability in (0, 1), got {false_alarm!r}.")
    return NormalDist().inv_cdf(1 - false_alarm / (2 * num_checks))


def mean_z_scores(samples: Tensor, expected: Tensor, variance: Tensor) -> Tensor:
    r"""z-scores of the sample means of ``samples`` ``(S, ...)`` (independent draws along the first dimension)
    against their expectations ``expected`` ``(...)``, with the closed-form variance ``variance`` ``(...)`` of one
    draw: :math:`(\bar x - \mu)/\sqrt{\sigma^2 / S}`.

    Raises ``ValueError`` where ``variance`` is not positive and finite: an entry of zero variance is not random
    (pick inputs whose estimate varies, e.g. two different points for a stationary kernel), and an infinite one has
    no standard error.
    """
    if samples.dim() < 1 or samples.size(0) < 2:
        raise ValueError(f"samples must hold at least two draws along dimension 0, got shape {tuple(samples.shape)}.")
    if not bool(((variance > 0) & variance.isfinite()).all()):
        raise ValueError(
            "variance must be positive and finite everywhere: an entry of zero variance is not a random estimate "
            "(check it exactly, or choose inputs whose estimate varies), an infinite one has no standard error."
        )
    return (samples.mean(0) - expected) / (variance / samples.size(0)).sqrt()


def assert_unbiased(samples: Tensor, expected: Tensor, variance: Tensor, false_alarm: float = 1e-6) -> Tensor:
    """Assert that the sample means of ``samples`` ``(S, ...)`` match ``expected`` within :func:`z_bound` of their
    closed-form standard errors (``variance`` of one draw); returns the z-scores.

    A correct estimator fails with probability at most ``false_alarm``; a bias of :math:`\\delta` fails once
    :math:`\\delta` exceeds about :math:`b\\sqrt{\\sigma^2/S}`, so more draws resolve smaller biases.
    """
    z = mean_z_scores(samples, expected, variance)
    bound = z_bound(z.numel(), false_alarm)
    worst = float(z.abs().max())
    if not worst <= bound:
        raise AssertionError(
            f"the mean of {samples.size(0)} draws is off its expectation by {worst:.2f} standard errors (bound "
            f"{bound:.2f} for {z.numel()} checks at false-alarm rate {false_alarm:g}); z-scores: {z.tolist()}"
        )
    return z


def diagonal_draws(kernel, x1: Tensor, x2: Tensor, num_draws: int) -> Tensor:
    """``kernel(x1, x2, diag=True)`` for ``num_draws`` feature draws, redrawn with generators seeded 0, 1, ...
    (``kernel.resample_features``), stacked as ``(num_draws, n)``: the sample of unbiasedness and variance checks
    of a kernel (the kernel keeps the last draw)."""
    values = []
    for draw in range(num_draws):
        kernel.resample_features(torch.Generator().manual_seed(draw))
        values.append(kernel(x1, x2, diag=True).detach())
    return torch.stack(values)
