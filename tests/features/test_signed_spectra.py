"""gprf.features.signed_spectra: the signed spectral measures behind signed random features — delta-Gaussian masses,
parts and exact norm laws, the spherical polynomial density (its Fourier transform gives the kernel back, truncation
where the variation diverges), sphere characteristic functions, the unit-norm check, and bad arguments."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gprf.features import check_unit_norm, delta_gaussian_spectrum, spherical_polynomial_spectrum
from gprf.features.signed_spectra import sphere_characteristic
from gprf.settings import validate_inputs
from tests.features.conftest import DELTA, X_DELTA, Y_DELTA, Z


def test_delta_gaussian_masses_and_parts():
    x, y = X_DELTA, Y_DELTA
    r = (x - y).norm(dim=-1)
    assert DELTA.masses == (1.5, 1.0)
    torch.testing.assert_close(DELTA.profile(r), 1.5 * torch.exp(-(r**2) / 2) - torch.exp(-(r**2) / 0.32))
    torch.testing.assert_close(DELTA.expected_profile(r), DELTA.profile(r))
    torch.testing.assert_close(DELTA.part_profile("negative", r), torch.exp(-(r**2) / 0.32))


def test_delta_gaussian_norm_law_is_exact():
    # The negative part is N(0, sigma^-2 I): its norm is chi_d / sigma, with E w^2 = d / sigma^2.
    norms = DELTA.sample_norms("negative", (20000,), 4, torch.Generator().manual_seed(0))
    second = norms.square()
    se = second.std() / math.sqrt(second.numel())
    assert (second.mean() - 4 / 0.16).abs() <= Z * se


def test_sphere_characteristic_matches_closed_forms():
    t = np.array([0.0, 1e-6, 0.3, 2.0, 7.0, 40.0])
    np.testing.assert_allclose(sphere_characteristic(t, 3), np.sinc(t / np.pi), rtol=1e-12, atol=1e-14)
    from scipy.special import j0

    np.testing.assert_allclose(sphere_characteristic(t, 2), j0(t), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(("a", "degree", "dim"), [(2.0, 3, 4), (2.0, 2, 3)])
def test_spherical_density_fourier_transform_reproduces_kernel(a, degree, dim):
    """Integrating the eq. 18 density against cos (radially: Omega_d) gives (1 - z^2/a^2)^p back.

    The variation is finite here (a = 2, p > (d-1)/2); with W = 80 the measured bias is below 1e-3 for
    every distance on the sphere, within Landau's uniform bound on the neglected tail.
    """
    spectrum = spherical_polynomial_spectrum(a, degree, dim, truncation=80.0)
    r = torch.linspace(0.0, 2.0, 9, dtype=torch.float64)
    bias = spectrum.truncation_bias(r)
    assert bool((bias.abs() <= spectrum.tail_variation_bound).all()), (bias, spectrum.tail_variation_bound)
    assert float(bias.abs().max()) < 1e-3, bias
    # Power: a wrong normalisation of the density (e.g. eq. 18's (2 pi)^(d/2) factor) is far off.
    assert abs(float(spectrum.masses[0] - spectrum.masses[1]) - 1.0) < 1e-3


def test_spherical_truncation_is_required_when_the_variation_diverges():
    with pytest.raises(ValueError, match="truncation=W"):
        spherical_polynomial_spectrum(3.0, 1, 16)
    truncated = spherical_polynomial_spectrum(3.0, 1, 3, truncation=10.0)
    assert truncated.tail_variation_bound == math.inf
    # The reported bias is real: at z = 0 the truncated kernel misses 1 by ~0.32.
    bias = truncated.truncation_bias(torch.tensor([0.0], dtype=torch.float64))
    assert abs(float(bias)) > 0.1


def test_unit_norm_check():
    x = torch.nn.functional.normalize(
        torch.randn(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64), dim=-1
    )
    check_unit_norm(x, "K")
    with pytest.raises(ValueError, match="K .*unit sphere"):
        check_unit_norm(1.01 * x, "K")
    with validate_inputs(False):
        check_unit_norm(1.01 * x, "K")


def test_bad_spectra():
    with pytest.raises(ValueError, match="identically zero"):
        delta_gaussian_spectrum([1.0, -1.0], [2.0, 2.0])
    with pytest.raises(ValueError, match="lengthscales must be positive"):
        delta_gaussian_spectrum([1.0], [0.0])
    with pytest.raises(ValueError, match="equal length"):
        delta_gaussian_spectrum([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="truncation must be a positive"):
        spherical_polynomial_spectrum(2.0, 3, 4, truncation=-1.0)
    with pytest.raises(ValueError, match="degree"):
        spherical_polynomial_spectrum(2.0, -1, 4, truncation=5.0)
