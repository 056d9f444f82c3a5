"""gprf.features.spectral: stationary kernels through their spectral laws — the profiles are GPyTorch's RBF and Matérn
kernels, the laws reproduce them (Bochner, Monte Carlo with closed-form standard errors), and the inverse-CDF radial
scales used by QMC follow the same law as the sampled ones."""

from __future__ import annotations

import math

import gpytorch
import pytest
import torch

from gprf.features import SPECTRA

Z = 5.0  # z-score bound: a correct implementation fails one check with probability below 6e-7
NUM_DRAWS = 20000


@pytest.mark.parametrize("name", list(SPECTRA))
def test_profiles_are_gpytorchs_kernels(name):
    spectrum = SPECTRA[name]
    exact = gpytorch.kernels.RBFKernel() if spectrum.nu is None else gpytorch.kernels.MaternKernel(nu=spectrum.nu)
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
    assert spectrum.nu is None
    torch.testing.assert_close(spectrum.radial_scale((4,), torch.Generator()), torch.ones(4, dtype=torch.float64))
    torch.testing.assert_close(spectrum.radial_scale_from_uniform(torch.tensor([0.2, 0.8])), torch.ones(2))
