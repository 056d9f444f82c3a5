"""cos_sin: values and gradients of the fused Fourier feature pair."""

from __future__ import annotations

import pytest
import torch

from gprf.ops import cos_sin


def test_values_match_the_concatenation(device, dtype):
    z = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0), dtype=dtype).to(device)
    expected = torch.cat([torch.cos(z), torch.sin(z)], dim=-1) * 0.3
    torch.testing.assert_close(cos_sin(z, 0.3), expected)


def test_gradcheck():
    z = torch.randn(4, 6, generator=torch.Generator().manual_seed(1), dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: cos_sin(t, 0.7), (z,))


def test_gradient_matches_autograd_of_the_concatenation():
    z = torch.randn(2, 5, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, 5, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    (grad,) = torch.autograd.grad((cos_sin(z, 2.0) * weights).sum(), z)
    (expected,) = torch.autograd.grad((torch.cat([torch.cos(z), torch.sin(z)], -1) * 2.0 * weights).sum(), z)
    torch.testing.assert_close(grad, expected)


def test_output_is_protected_against_in_place_changes():
    z = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    out = cos_sin(z)
    out.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()
