"""Fast Walsh–Hadamard transform and power-of-two padding (gprf.ops.fwht)."""

from __future__ import annotations

import pytest
import torch
from scipy.linalg import hadamard

from gprf.ops import fwht, next_power_of_two, pad_to_power_of_two

POWERS = [1, 2, 4, 8, 16, 32, 64, 128, 256]


def _tol(dtype: torch.dtype, d: int) -> dict:
    # Each output is a sum of d terms of size O(1): rounding error grows like eps * log2(d) * sqrt(d).
    eps = torch.finfo(dtype).eps
    return {"rtol": 0.0, "atol": 20 * eps * max(d, 2) ** 0.5 * max(d.bit_length(), 1)}


@pytest.mark.parametrize("d", POWERS)
def test_matches_scipy_hadamard(d, dtype, device, generator):
    x = torch.randn(5, d, generator=generator, dtype=torch.float64)
    expected = x @ torch.as_tensor(hadamard(d), dtype=torch.float64)
    out = fwht(x.to(device=device, dtype=dtype))
    assert out.dtype == dtype and out.device.type == device.type and out.shape == x.shape
    torch.testing.assert_close(out.cpu().double(), expected, **_tol(dtype, d))


@pytest.mark.parametrize("batch_shape", [(), (3,), (2, 3), (2, 1, 4)])
@pytest.mark.parametrize("dim_position", [0, 1, -1])
def test_any_batch_shape_and_dim(batch_shape, dim_position, generator):
    d = 16
    shape = list(batch_shape)
    position = dim_position if dim_position >= 0 else len(shape) + 1 + dim_position
    position = min(position, len(shape))
    shape.insert(position, d)
    x = torch.randn(*shape, generator=generator, dtype=torch.float64)
    h = torch.as_tensor(hadamard(d), dtype=torch.float64)
    expected = (x.movedim(position, -1) @ h).movedim(-1, position)
    torch.testing.assert_close(fwht(x, dim=position), expected)
    # A negative `dim` names the same axis.
    torch.testing.assert_close(fwht(x, dim=position - x.dim()), expected)


def test_non_contiguous_input(generator):
    x = torch.randn(8, 6, generator=generator, dtype=torch.float64).mT  # (6, 8), non-contiguous
    assert not x.is_contiguous()
    torch.testing.assert_close(fwht(x), x @ torch.as_tensor(hadamard(8), dtype=torch.float64))


def test_complex_input(generator):
    d = 32
    x = torch.randn(4, d, generator=generator, dtype=torch.complex128)
    torch.testing.assert_close(fwht(x), x @ torch.as_tensor(hadamard(d), dtype=torch.complex128))


def test_empty_batch():
    assert fwht(torch.zeros(0, 8)).shape == (0, 8)
    assert fwht(torch.zeros(3, 0, 8)).shape == (3, 0, 8)


@pytest.mark.parametrize("d", POWERS)
def test_involution_up_to_d(d, dtype, generator):
    x = torch.randn(3, 2, d, generator=generator, dtype=torch.float64).to(dtype)
    eps = torch.finfo(dtype).eps
    torch.testing.assert_close(fwht(fwht(x)), d * x, rtol=0.0, atol=50 * eps * d * max(d.bit_length(), 1))


def test_gradcheck(generator):
    x = torch.randn(3, 8, generator=generator, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(fwht, (x,))
    y = torch.randn(4, 2, 3, generator=generator, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: fwht(t, dim=-2), (y,))
    assert torch.autograd.gradgradcheck(fwht, (x,))


def test_gradient_is_hadamard_transpose(generator):
    # H is symmetric, so d<v, Hx>/dx = Hv.
    d = 16
    x = torch.randn(d, generator=generator, dtype=torch.float64).unsqueeze(0).requires_grad_(True)
    v = torch.randn(1, d, generator=generator, dtype=torch.float64)
    (fwht(x) * v).sum().backward()
    torch.testing.assert_close(x.grad, v @ torch.as_tensor(hadamard(d), dtype=torch.float64))


@pytest.mark.parametrize("d", [0, 3, 5, 6, 12, 100])
def test_non_power_of_two_raises(d):
    with pytest.raises(ValueError, match="pad_to_power_of_two"):
        fwht(torch.zeros(2, d))


def test_non_power_of_two_along_dim_raises():
    with pytest.raises(ValueError, match="pad_to_power_of_two"):
        fwht(torch.zeros(6, 8), dim=0)


@pytest.mark.parametrize(
    ("n", "expected"), [(1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (63, 64), (64, 64), (65, 128), (1000, 1024)]
)
def test_next_power_of_two(n, expected):
    assert next_power_of_two(n) == expected


@pytest.mark.parametrize("n", [0, -1, -8])
def test_next_power_of_two_rejects_non_positive(n):
    with pytest.raises(ValueError, match="n >= 1"):
        next_power_of_two(n)


@pytest.mark.parametrize("d", [1, 3, 5, 6, 7, 10, 33])
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_pad_to_power_of_two_keeps_inner_products(d, dim, generator):
    shape = [4, 4]
    shape[dim] = d
    x = torch.randn(*shape, generator=generator, dtype=torch.float64)
    padded = pad_to_power_of_two(x, dim=dim)
    target = next_power_of_two(d)
    assert padded.size(dim) == target
    assert padded.shape[1 - (dim % 2)] == 4
    # The original entries come first, the padding is zero.
    torch.testing.assert_close(padded.narrow(dim, 0, d), x)
    assert bool((padded.narrow(dim, d, target - d) == 0).all())
    # Gram matrices along the padded axis are unchanged.
    gram = x.movedim(dim, -1) @ x.movedim(dim, -1).mT
    torch.testing.assert_close(padded.movedim(dim, -1) @ padded.movedim(dim, -1).mT, gram)


@pytest.mark.parametrize("d", [1, 2, 8, 64])
def test_pad_is_noop_for_powers_of_two(d, generator):
    x = torch.randn(3, d, generator=generator)
    assert pad_to_power_of_two(x) is x


def test_pad_keeps_dtype_device_and_autograd(dtype, device, generator):
    x = torch.randn(2, 5, generator=generator, dtype=torch.float64).to(device=device, dtype=dtype).requires_grad_(True)
    padded = pad_to_power_of_two(x)
    assert padded.dtype == dtype and padded.device.type == device.type
    padded.sum().backward()
    torch.testing.assert_close(x.grad, torch.ones_like(x))


def test_pad_rejects_empty_dimension():
    with pytest.raises(ValueError, match="n >= 1"):
        pad_to_power_of_two(torch.zeros(3, 0))


def test_pad_then_fwht_preserves_norm_up_to_scale(generator):
    # H / sqrt(d) is orthogonal, so padding followed by the normalised transform is an isometry.
    x = torch.randn(7, 10, generator=generator, dtype=torch.float64)
    h = fwht(pad_to_power_of_two(x)) / 16**0.5
    torch.testing.assert_close(h.norm(dim=-1), x.norm(dim=-1))
