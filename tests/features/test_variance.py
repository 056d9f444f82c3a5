"""gprf.features.variance: the closed-form variance of the iid random Fourier estimate, against the variance of
cos(w delta) computed independently by Gauss-Hermite quadrature."""

from __future__ import annotations

import numpy as np
import torch

from gprf.features.variance import fourier_iid_variance


def test_rbf_variance_equals_the_quadrature_variance_of_the_cosine():
    """For w ~ N(0, 1) and m iid frequencies, Var[(1/m) sum cos(w_i delta)] = Var[cos(w delta)] / m."""
    nodes, weights = np.polynomial.hermite.hermgauss(120)
    nodes, weights = torch.as_tensor(nodes), torch.as_tensor(weights) / np.sqrt(np.pi)
    delta = torch.tensor([0.0, 0.2, 0.9, 2.0, 4.0], dtype=torch.float64)
    cosine = torch.cos(np.sqrt(2.0) * nodes * delta.unsqueeze(-1))  # w = sqrt(2) t for the weight e^{-t^2}
    mean = (weights * cosine).sum(-1)
    variance = (weights * cosine.square()).sum(-1) - mean.square()
    k, k_two = torch.exp(-0.5 * delta.square()), torch.exp(-2.0 * delta.square())
    for m in (1, 7):
        torch.testing.assert_close(fourier_iid_variance(k, k_two, m), variance / m, rtol=1e-10, atol=1e-12)
    assert fourier_iid_variance(k, k_two, 3)[0] == 0  # delta = 0: every cosine is 1
