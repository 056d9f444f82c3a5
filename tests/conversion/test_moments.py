"""gprf.conversion.moments: composite closed forms (ScaleKernel, sums of independent parts, exact roots) agree with
their parts' closed forms and with a Monte-Carlo variance."""

from __future__ import annotations

import torch
from gpytorch.kernels import LinearKernel, RBFKernel, ScaleKernel

import gprf
from gprf.conversion import approximation_moments

Z_BOUND = 4.5


def test_sum_of_scaled_fourier_and_linear_parts():
    kernel = ScaleKernel(RBFKernel(active_dims=[0, 1])) + LinearKernel(active_dims=[2])
    kernel.kernels[0].outputscale = 1.7
    x, y = torch.randn(5, 3, dtype=torch.float64), torch.randn(5, 3, dtype=torch.float64)
    approximation = gprf.random_features(kernel.double(), 17, seed=0)  # 16 Fourier features and 1 linear column
    mean, variance = approximation_moments(approximation, x, y)
    torch.testing.assert_close(mean, kernel(x, y, diag=True).detach())
    rff = approximation.kernels[0].base_kernel
    z1, z2 = rff.scale_inputs(x[:, :2]), rff.scale_inputs(y[:, :2])
    torch.testing.assert_close(variance, 1.7**2 * rff.feature_map.variance(z1, z2).detach())
    # A Monte-Carlo check of the variance itself: the sample variance over redraws.
    values = []
    for draw in range(400):
        approximation.kernels[0].base_kernel.resample_features(torch.Generator().manual_seed(draw))
        values.append(approximation(x, y, diag=True).detach())
    values = torch.stack(values)
    z = (values.var(0) - variance.detach()) / (variance.detach() * (2 / 399) ** 0.5)
    assert z.abs().max() < 2 * Z_BOUND  # sums of cosines are not Gaussian: a wider bound
