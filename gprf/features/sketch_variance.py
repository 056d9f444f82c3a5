r"""Closed-form variances of polynomial sketches (Wacker, Kanagawa & Filippone 2024, Theorems 2, 5 and 10).

Notation for a pair of inputs as the sketch sees them (after prepending :math:`\sqrt{\text{bias}}`):
:math:`c = x^\top y`, :math:`N = \lVert x\rVert^2\lVert y\rVert^2`, :math:`S = \sum_k x_k^2y_k^2`,
:math:`D` features, :math:`p` the degree and :math:`d` the padded dimension of TensorSRHT. Each feature
is a product of :math:`p` independent projections, so its second moment is the :math:`p`-th power of one
projection's second moment :math:`M_2`; averaging :math:`D` independent features divides by :math:`D`.

Reference: J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal of
Machine Learning Research, 2024 (arXiv:2201.08712).
"""

from __future__ import annotations

from torch import Tensor


def pair_statistics(x1: Tensor, x2: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """:math:`(c, N, S)` row by row for inputs of shape ``(..., n, d)``."""
    c = (x1 * x2).sum(-1)
    n = x1.square().sum(-1) * x2.square().sum(-1)
    s = (x1.square() * x2.square()).sum(-1)
    return c, n, s


def product_variance(second_moment: Tensor, c: Tensor, degree: int, num_features: int) -> Tensor:
    r""":math:`[M_2^p - c^{2p}]/D` for iid features whose single projection has second moment :math:`M_2`."""
    return (second_moment.pow(degree) - c.pow(2 * degree)) / num_features


def srht_pair_count(num_features: int, padded_dim: int) -> int:
    r"""Ordered pairs of distinct features in one block:
    :math:`P = \lfloor D/d\rfloor d(d-1) + (D \bmod d)(D \bmod d - 1)`."""
    full_blocks, remainder = divmod(num_features, padded_dim)
    return full_blocks * padded_dim * (padded_dim - 1) + remainder * (remainder - 1)


def srht_correction(shifted: Tensor, c: Tensor, degree: int, num_features: int, padded_dim: int) -> Tensor:
    r"""Covariance of distinct features within a block: :math:`\frac{P}{D^2}[(c^2 - A/(d-1))^p - c^{2p}]`."""
    pairs = srht_pair_count(num_features, padded_dim)
    inner = c.square() - shifted / (padded_dim - 1)
    return pairs / num_features**2 * (inner.pow(degree) - c.pow(2 * degree))


def sketch_variance(
    sketch: str,
    is_complex: bool,
    part: str,
    c: Tensor,
    n: Tensor,
    s: Tensor,
    degree: int,
    num_features: int,
    padded_dim: int | None = None,
) -> Tensor:
    r"""Variance of a degree-``p`` sketch of :math:`(x^\top y)^p` (Wacker et al. 2024, Theorems 2, 5 and 10).

    ``part="real"``: variance of :math:`\mathrm{Re}\,\hat k`; ``part="total"``: :math:`E|\hat k - k|^2`
    (equal for real sketches). Gaussian sketches have :math:`M_2 = N + 2c^2` (real) and :math:`N + c^2`
    (complex, :math:`E|\cdot|^2`); Rademacher sketches subtract the fourth-moment defect :math:`2S` (real)
    or :math:`S` (complex). For the real part of a complex sketch,
    :math:`\mathrm{Var\,Re}\,z = \tfrac12(E|z|^2 + \mathrm{Re}\,E z^2) - c^{2p}` with :math:`E z^2` the
    :math:`p`-th power of :math:`2c^2` (Gaussian) or :math:`2c^2 - S` (Rademacher). TensorSRHT adds the
    within-block covariance term of Theorems 5 and 10.
    """
    if sketch == "gaussian":
        if not is_complex:
            return product_variance(n + 2 * c.square(), c, degree, num_features)
        total = product_variance(n + c.square(), c, degree, num_features)
        if part == "total":
            return total
        return 0.5 * (total + product_variance(2 * c.square(), c, degree, num_features))

    if not is_complex:
        variance = product_variance(n + 2 * c.square() - 2 * s, c, degree, num_features)
        if sketch == "srht":
            variance = variance + srht_correction(n + c.square() - 2 * s, c, degree, num_features, padded_dim)
        return variance

    total = product_variance(n + c.square() - s, c, degree, num_features)
    if part == "total":
        if sketch == "srht":
            total = total + srht_correction(n - s, c, degree, num_features, padded_dim)
        return total
    variance = 0.5 * (total + product_variance(2 * c.square() - s, c, degree, num_features))
    if sketch == "srht":
        variance = variance + 0.5 * (
            srht_correction(c.square() - s, c, degree, num_features, padded_dim)
            + srht_correction(n - s, c, degree, num_features, padded_dim)
        )
    return variance
