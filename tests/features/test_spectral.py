"""gprf.features.spectral: stationary kernels through their spectral laws — the profiles are GPyTorch's RBF and Matérn
kernels, the laws reproduce them (Bochner, Monte Carlo with closed-form standard errors), and the inverse-CDF radial
scales used by QMC follow the same law as the sampled ones."""

from __future__ import annotations

import math

import gpytorch
import pytest
import torch

from gprf.features import SPECTRA, GaussianSpectrum, MaternSpectrum, RandomFourierFeatures, StationarySpectrum
from gprf.features.spectral import stationary_spectrum

Z = 5.0  # z-score bound: a correct implementation fails one check with probability below 6e-7
NUM_DRAWS = 20000


@pytest.mark.parametrize("name", list(SPECTRA))
def test_profiles_are_gpytorchs_kernels(name):
    spectrum = SPECTRA[name]
    if isinstance(spectrum, GaussianSpectrum):
        exact = gpytorch.kernels.RBFKernel()
    else:
        exact = gpytorch.kernels.MaternKernel(nu=spectrum.nu)
    exact = exact.double()
    exact.lengthscale = 1.0
    x = torch.zeros(1, 1, dtype=torch.float64)
    r = torch.tensor([0.0, 0.1, 0.7, 1.5, 3.0], dtype=torch.float64)
    expected = exact(x, r.unsqueeze(-1)).to_dense().squeeze(0).detach()
    torch.testing.assert_close(spectrum.profile(r), expected)


@pytest.mark.parametrize("name", list(SPECTRA))
def test_the_spectral_law_reproduces_the_profile(name):
    """E[cos(s z^T delta)] = k(|delta|) for w = s z, z ~ N(0, I_3); cos is bounded, so the sample mean has
    standard error at most sqrt(Var cos / n) <= 1 / sqrt(n)."""
    spectrum = SPECTRA[name]
    generator = torch.Generator().manual_seed(0)
    z = torch.randn(NUM_DRAWS, 3, generator=generator, dtype=torch.float64)
    w = spectrum.radial_scale((NUM_DRAWS,), generator).unsqueeze(-1) * z
    delta = torch.tensor([[0.3, 0.0, 0.0], [0.5, -0.5, 0.2], [1.0, 1.0, 1.0]], dtype=torch.float64)
    values = torch.cos(w @ delta.mT)  # (n, 3)
    standard_error = values.std(0) / math.sqrt(NUM_DRAWS)
    error = values.mean(0) - spectrum.profile(delta.norm(dim=-1))
    assert bool((error.abs() <= Z * standard_error).all()), (error, standard_error)


@pytest.mark.parametrize("name", ["matern12", "matern32", "matern52"])
def test_inverse_cdf_scales_follow_the_sampled_law(name):
    """s(u) is decreasing in u (s = sqrt(2 nu / g) with g at its u-quantile), so P(s <= s(u)) = 1 - u for sampled s;
    the empirical fraction has standard error sqrt(u (1 - u) / n)."""
    spectrum = SPECTRA[name]
    draws = spectrum.radial_scale((NUM_DRAWS,), torch.Generator().manual_seed(1))
    u = torch.tensor([0.1, 0.3, 0.5, 0.7, 0.9], dtype=torch.float64)
    quantiles = spectrum.radial_scale_from_uniform(u)
    assert bool((quantiles.diff() < 0).all())
    fraction = (draws.unsqueeze(-1) <= quantiles).double().mean(0)
    assert bool(((fraction - (1 - u)).abs() <= Z * (u * (1 - u) / NUM_DRAWS).sqrt()).all()), fraction


def test_rbf_has_unit_radial_scale():
    spectrum = SPECTRA["rbf"]
    assert not spectrum.random_radial_scale and MaternSpectrum.random_radial_scale
    torch.testing.assert_close(spectrum.radial_scale((4,), torch.Generator()), torch.ones(4, dtype=torch.float64))
    torch.testing.assert_close(spectrum.radial_scale_from_uniform(torch.tensor([0.2, 0.8])), torch.ones(2))


def test_matern_names_come_from_nu_and_other_nu_are_refused():
    assert [MaternSpectrum(nu).name for nu in (0.5, 1.5, 2.5)] == ["matern12", "matern32", "matern52"]
    assert list(SPECTRA) == ["rbf", "matern12", "matern32", "matern52"]
    with pytest.raises(ValueError, match=r"nu must be one of 0.5, 1.5, 2.5 \(GPyTorch's Matérn\), got 3.5"):
        MaternSpectrum(3.5)


class _UnitCauchy(StationarySpectrum):
    """k(r) = 1 / (1 + r^2 / 2): s^2 ~ Exp(1), with no inverse CDF (QMC unavailable)."""

    name = "unit_cauchy"

    def profile(self, r):
        return 1.0 / (1.0 + r.square() / 2)

    def radial_scale(self, shape, generator):
        return torch.empty(shape, dtype=torch.float64).exponential_(generator=generator).sqrt()


def test_a_spectrum_is_found_by_name_or_given_itself():
    assert stationary_spectrum("matern32") is SPECTRA["matern32"]
    spectrum = _UnitCauchy()
    assert stationary_spectrum(spectrum) is spectrum
    with pytest.raises(ValueError, match="Unknown kernel 'cauchy'; valid choices are: 'rbf', 'matern12'"):
        stationary_spectrum("cauchy")
    with pytest.raises(TypeError, match="abstract methods? .*profile"):
        type("NoProfile", (StationarySpectrum,), {"name": "x", "radial_scale": _UnitCauchy.radial_scale})()


def test_a_spectrum_without_an_inverse_cdf_refuses_qmc_only():
    spectrum = _UnitCauchy()
    with pytest.raises(NotImplementedError, match="'unit_cauchy' spectrum has no inverse CDF.*sampler='iid'"):
        RandomFourierFeatures(2, 8, kernel=spectrum, sampler="qmc", seed=0)
    for sampler in ("iid", "orthogonal", "structured"):
        assert RandomFourierFeatures(2, 8, kernel=spectrum, sampler=sampler, seed=0).kernel == "unit_cauchy"
