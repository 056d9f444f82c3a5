r"""Property-based kernel contracts on hypothesis-chosen inputs: every feature kernel gives symmetric, positive
semi-definite matrices (within float64 rounding) equal to the product of its roots, and the Monte-Carlo mean of
random Fourier features and of the Gaussian polynomial sketch is the exact kernel within a z-bound derived from the
closed-form variance of one draw:

* random Fourier features with :math:`m = F/2` frequencies, :math:`\Delta = (x - y)/\ell`:
  :math:`\mathrm{Var}\,\hat k = ([1 + k(2\Delta)]/2 - k(\Delta)^2)/m`;
* the real Gaussian sketch of :math:`(x^\top y)^p` with :math:`D` features, :math:`c = x^\top y`,
  :math:`N = \lVert x\rVert^2\lVert y\rVert^2`: :math:`\mathrm{Var}\,\hat k = [(N + 2c^2)^p - c^{2p}]/D`.

The draws are seeded (``diagonal_draws``) and the examples derandomised, so each check either always passes or
always fails; the bound covers every check of every example at false-alarm rate :math:`10^{-6}`.
"""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gprf.kernels import (
    AdditiveFeatureKernel,
    MaclaurinKernel,
    OffsetPolynomialSketchKernel,
    PolynomialSketchKernel,
    QuadratureKernel,
    RandomFourierKernel,
)
from gprf.linalg import feature_root
from gprf.testing import SEED, assert_unbiased, diagonal_draws
from tests.helpers.properties import PROPERTIES

D = 3
FAMILIES = {
    "fourier": lambda: RandomFourierKernel(32, num_dims=D, seed=SEED),
    "matern": lambda: RandomFourierKernel(32, num_dims=D, kernel="matern32", sampler="orthogonal", seed=SEED),
    "maclaurin": lambda: MaclaurinKernel(32, num_dims=D, seed=SEED),
    "sketch": lambda: PolynomialSketchKernel(32, num_dims=D, degree=3, sketch="srht", complex=True, seed=SEED),
    "offset_sketch": lambda: OffsetPolynomialSketchKernel(32, num_dims=D, degree=2, seed=SEED),
    "quadrature": lambda: QuadratureKernel(2, num_dims=D, seed=SEED),
    "additive": lambda: AdditiveFeatureKernel(4, num_dims=D, order=2, seed=SEED),
}
_COORDINATES = st.floats(min_value=-2.0, max_value=2.0, allow_nan=False, width=64)
_POINTS = st.integers(min_value=1, max_value=12).flatmap(lambda n: hnp.arrays("float64", (n, D), elements=_COORDINATES))
_LENGTHSCALES = st.floats(min_value=0.05, max_value=50.0)

#: Examples of each unbiasedness property (sizes the Bonferroni bound over all of them).
UNBIASED_EXAMPLES = 8
NUM_DRAWS = 400


@PROPERTIES
@given(family=st.sampled_from(sorted(FAMILIES)), points=_POINTS, lengthscale=_LENGTHSCALES)
def test_matrices_are_symmetric_psd_and_the_product_of_their_roots(family, points, lengthscale):
    kernel = FAMILIES[family]().double()
    if kernel.has_lengthscale:
        kernel.lengthscale = lengthscale
    x = torch.from_numpy(points)
    with torch.no_grad():
        covariance = kernel(x)
        dense = covariance.to_dense()
        root = feature_root(covariance).scaled_features()
    scale = max(1.0, float(dense.diagonal().max()))
    tolerance = 10 * x.size(0) * torch.finfo(torch.float64).eps * scale  # rounding of the root's inner products
    torch.testing.assert_close(dense, root @ root.mT, rtol=0, atol=tolerance)
    torch.testing.assert_close(dense, dense.mT, rtol=0, atol=tolerance)
    assert float(torch.linalg.eigvalsh(dense).min()) >= -tolerance
    assert bool(dense.isfinite().all())


def _pairs(data, min_value, max_value):
    return torch.from_numpy(
        data.draw(hnp.arrays("float64", (2, 3, D), elements=st.floats(min_value=min_value, max_value=max_value)))
    )


@settings(PROPERTIES, max_examples=UNBIASED_EXAMPLES)
@given(data=st.data(), lengthscale=st.floats(min_value=0.3, max_value=3.0))
def test_random_fourier_features_are_unbiased_within_their_closed_form_variance(data, lengthscale):
    x1, x2 = _pairs(data, -1.0, 1.0)
    kernel = RandomFourierKernel(16, num_dims=D, seed=SEED).double()
    kernel.lengthscale = lengthscale
    samples = diagonal_draws(kernel, x1, x2, NUM_DRAWS)
    distance = ((x1 - x2) / lengthscale).square().sum(-1)
    exact, doubled = (-distance / 2).exp(), (-2 * distance).exp()  # k(delta), k(2 delta) of the RBF kernel
    variance = ((1 + doubled) / 2 - exact.square()) / (16 // 2)
    random = variance > 1e-12  # coinciding points give k = 1 exactly (no variance to test against)
    torch.testing.assert_close(samples[:, ~random], torch.ones_like(samples[:, ~random]), rtol=0, atol=1e-12)
    if bool(random.any()):
        assert_unbiased(samples[:, random], exact[random], variance[random], false_alarm=1e-6 / UNBIASED_EXAMPLES)


@settings(PROPERTIES, max_examples=UNBIASED_EXAMPLES)
@given(data=st.data(), degree=st.integers(min_value=1, max_value=3))
def test_the_gaussian_sketch_is_unbiased_within_its_closed_form_variance(data, degree):
    x1, x2 = _pairs(data, -1.0, 1.0)
    kernel = PolynomialSketchKernel(16, num_dims=D, degree=degree, sketch="gaussian", seed=SEED).double()
    kernel.lengthscale = 1.0
    samples = diagonal_draws(kernel, x1, x2, NUM_DRAWS)
    c = (x1 * x2).sum(-1)
    n = x1.square().sum(-1) * x2.square().sum(-1)
    variance = ((n + 2 * c.square()).pow(degree) - c.pow(2 * degree)) / 16
    random = variance > 1e-12  # a zero point gives k = 0 exactly
    torch.testing.assert_close(samples[:, ~random], c[~random].pow(degree).expand_as(samples[:, ~random]))
    if bool(random.any()):
        assert_unbiased(
            samples[:, random], c[random].pow(degree), variance[random], false_alarm=1e-6 / UNBIASED_EXAMPLES
        )
