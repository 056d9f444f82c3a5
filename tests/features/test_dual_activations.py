"""Dual activations: ReLU/exponential coefficients and closed forms, the degree law, bad coefficients."""

from __future__ import annotations

import math

import pytest
import torch

from gprf.features import DualActivation
from gprf.features.dual_activations import as_dual_activation, relu_coefficients, relu_dual

Z = 5.0


def test_relu_coefficients_closed_form_and_sum():
    b = relu_coefficients(8)
    pi = math.pi
    expected = torch.tensor(
        [1 / pi, 1 / 2, 1 / (2 * pi), 0, 1 / (24 * pi), 0, 1 / (80 * pi), 0, 5 / (896 * pi)], dtype=torch.float64
    )
    torch.testing.assert_close(b, expected, rtol=1e-14, atol=0)
    relu = DualActivation.relu()  # tail mass <= 1e-8 dropped, then renormalised
    assert 1.0 - float(relu_coefficients(len(relu.coefficients) - 1).sum()) <= 1e-8
    assert abs(float(relu.coefficients.sum()) - 1.0) < 1e-14
    rho = torch.linspace(-1.0, 1.0, 201, dtype=torch.float64)
    assert float((relu.series(rho) - relu(rho)).abs().max()) <= 1e-8
    # sigma_hat'(1) = sum_n n b_n = 1 for ReLU: the truncated law loses at most its tail's share of it.
    assert 0.99 < relu.expected_degree <= 1.0


def test_relu_dual_is_the_gaussian_expectation(generator):
    # sigma_hat(rho) = E[2 relu(u) relu(v)] for standard normals with correlation rho.
    rho = torch.tensor([-0.9, -0.3, 0.0, 0.5, 0.95], dtype=torch.float64)
    u = torch.randn(200_000, 1, generator=generator, dtype=torch.float64)
    e = torch.randn(200_000, 1, generator=generator, dtype=torch.float64)
    v = rho * u + torch.sqrt(1 - rho**2) * e
    samples = 2 * torch.relu(u) * torch.relu(v)
    mean, se = samples.mean(0), samples.std(0) / math.sqrt(u.size(0))
    assert bool(((mean - relu_dual(rho)).abs() <= Z * se).all())


def test_relu_gradient_is_finite_at_the_poles():
    rho = torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0], dtype=torch.float64, requires_grad=True)
    relu_dual(rho).sum().backward()
    torch.testing.assert_close(rho.grad, (math.pi / 2 + torch.arcsin(rho.detach())) / math.pi)
    interior = torch.tensor([-0.7, 0.2, 0.9], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(relu_dual, (interior,))


@pytest.mark.parametrize("scale", [0.5, 1.0, 2.0])
def test_exponential_series(scale):
    act = DualActivation.exponential(scale)
    n = torch.arange(len(act.coefficients), dtype=torch.float64)
    expected = torch.exp(n * math.log(scale**2) - scale**2 - torch.lgamma(n + 1))
    torch.testing.assert_close(act.coefficients, expected / expected.sum(), rtol=1e-12, atol=1e-300)
    rho = torch.linspace(-1.0, 1.0, 41, dtype=torch.float64)
    torch.testing.assert_close(act.series(rho), act(rho), rtol=0, atol=1e-14)
    assert abs(act.expected_degree - scale**2) < 1e-12
    # Beyond 1 (second moments) the entire series keeps its closed form.
    torch.testing.assert_close(
        act.extended(torch.tensor([1.5], dtype=torch.float64)),
        torch.exp(torch.tensor([0.5 * scale**2], dtype=torch.float64)),
    )


def test_relu_series_diverges_beyond_one():
    out = DualActivation.relu().extended(torch.tensor([0.5, 1.0, 1.2], dtype=torch.float64))
    assert torch.isfinite(out[:2]).all() and math.isinf(out[2])
    # A degree-truncated ReLU is a polynomial: finite everywhere.
    truncated = DualActivation.relu(max_degree=6)
    torch.testing.assert_close(truncated.coefficients, relu_coefficients(6) / relu_coefficients(6).sum())
    assert math.isfinite(float(truncated.extended(torch.tensor(1.2, dtype=torch.float64))))


def test_degree_law_matches_coefficients():
    act = DualActivation.from_coefficients([0.2, 0.5, 0.0, 0.3])
    n = 40_000
    degrees = act.sample_degrees(n, torch.Generator().manual_seed(3))
    for k, p in enumerate([0.2, 0.5, 0.0, 0.3]):
        frequency = float((degrees == k).double().mean())
        assert abs(frequency - p) <= Z * math.sqrt(p * (1 - p) / n) + 1e-12
    torch.testing.assert_close(
        act(torch.tensor(0.5, dtype=torch.float64)), torch.tensor(0.2 + 0.25 + 0.3 * 0.125, dtype=torch.float64)
    )


def test_identity_and_names():
    rho = torch.tensor([-0.4, 0.7], dtype=torch.float64)
    torch.testing.assert_close(as_dual_activation("identity")(rho), rho)
    assert as_dual_activation("relu").name == "relu" and as_dual_activation("exponential").name == "exponential"
    act = DualActivation.identity()
    assert as_dual_activation(act) is act


def test_bad_coefficients():
    with pytest.raises(ValueError, match="non-negative.*degrees \\[1\\]"):
        DualActivation.from_coefficients([0.6, -0.1, 0.5])
    with pytest.raises(ValueError, match="sum to 1.*normalize=True"):
        DualActivation.from_coefficients([0.5, 0.2])
    torch.testing.assert_close(
        DualActivation.from_coefficients([1.0, 3.0], normalize=True).coefficients,
        torch.tensor([0.25, 0.75], dtype=torch.float64),
    )
    with pytest.raises(ValueError, match="all zero"):
        DualActivation.from_coefficients([0.0, 0.0], normalize=True)
    with pytest.raises(ValueError, match="non-empty"):
        DualActivation.from_coefficients([])
    with pytest.raises(TypeError, match="sequence of numbers"):
        DualActivation.from_coefficients(["a"])
    with pytest.raises(ValueError, match="Unknown activation 'tanh'"):
        as_dual_activation("tanh")
    with pytest.raises(ValueError, match="scale"):
        DualActivation.exponential(0.0)
    with pytest.raises(ValueError, match="tolerance"):
        DualActivation.relu(tolerance=0.0)
