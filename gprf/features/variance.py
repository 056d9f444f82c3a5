"""Closed-form variances of random-feature kernel estimators."""

from __future__ import annotations

from torch import Tensor


def fourier_iid_variance(k_delta: Tensor, k_two_delta: Tensor, num_frequencies: int) -> Tensor:
    r"""Variance of the iid random Fourier feature estimate with ``m = num_frequencies`` cos/sin pairs.

    :math:`\hat k(\Delta) = \frac1m\sum_i \cos(w_i^\top\Delta)` with :math:`w_i` iid from the spectral
    law, and :math:`\cos^2 a = (1 + \cos 2a)/2`, give

    .. math::
        \mathrm{Var}\,\hat k(\Delta) = \frac{1}{m}\Big[\frac{1 + k(2\Delta)}{2} - k(\Delta)^2\Big]

    (Sutherland & Schneider 2015, eq. 2).

    Reference: D. J. Sutherland, J. Schneider. *On the Error of Random Fourier Features.* Conference on Uncertainty
    in Artificial Intelligence (UAI), 2015.
    """
    return (0.5 * (1.0 + k_two_delta) - k_delta.square()) / num_frequencies
