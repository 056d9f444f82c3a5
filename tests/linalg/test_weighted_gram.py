"""gprf.linalg.weighted_gram: the weighted Gram matrix R^T diag(1/s) R and its projection, their values and their
one-GEMM backward passes (gradcheck), and the block-triangular symmetric Gram."""

from __future__ import annotations

import pytest
import torch

from gprf.linalg import symmetric_gram, weighted_gram, weighted_gram_projection


def _inputs(n=9, f=4, batch=(), seed=0, dtype=torch.float64):
    generator = torch.Generator().manual_seed(seed)
    root = torch.randn(*batch, n, f, generator=generator, dtype=dtype)
    noise = 0.1 + torch.rand(*batch, n, generator=generator, dtype=dtype)
    return root, noise


def test_weighted_gram_value_and_gradcheck():
    root, noise = _inputs()
    torch.testing.assert_close(weighted_gram(root, noise), root.mT @ torch.diag(1 / noise) @ root)
    root.requires_grad_(True)
    noise.requires_grad_(True)
    assert torch.autograd.gradcheck(weighted_gram, (root, noise))
    batch_root, batch_noise = _inputs(batch=(2,), seed=1)
    assert torch.autograd.gradcheck(
        weighted_gram, (batch_root.requires_grad_(True), batch_noise[0].requires_grad_(True))
    )


@pytest.mark.parametrize("shape", [(2, 40, 300), (30, 513), (5, 7)])
def test_symmetric_gram_matches_the_full_product(shape):
    a = torch.randn(*shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    torch.testing.assert_close(symmetric_gram(a), a.mT @ a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("noise_shape", [(2, 9), (2, 1)], ids=["heteroscedastic", "constant"])
def test_gram_projection_values_and_gradcheck(noise_shape):
    generator = torch.Generator().manual_seed(8)
    root = torch.randn(2, 9, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    noise = (0.5 + torch.rand(*noise_shape, generator=generator, dtype=torch.float64)).requires_grad_(True)
    rhs = torch.randn(2, 9, 2, generator=generator, dtype=torch.float64, requires_grad=True)
    gram, projection = weighted_gram_projection(root, noise, rhs)
    inverse = 1 / noise.expand(2, 9).unsqueeze(-1)
    torch.testing.assert_close(gram, root.mT @ (root * inverse))
    torch.testing.assert_close(projection, root.mT @ (rhs * inverse))
    assert torch.autograd.gradcheck(weighted_gram_projection, (root, noise, rhs))


def test_constant_noise_gram_value_and_gradcheck():
    root, _ = _inputs(batch=(2,))
    noise = torch.tensor([[0.3], [0.7]], dtype=torch.float64)
    expected = weighted_gram(root, noise.expand(2, 9))
    torch.testing.assert_close(weighted_gram(root, noise), expected)
    assert torch.autograd.gradcheck(weighted_gram, (root.requires_grad_(True), noise.requires_grad_(True)))


@pytest.mark.parametrize("noise_columns", [1, 120])
def test_projection_of_no_right_hand_sides_has_the_gram_gradient(noise_columns):
    """A right-hand side with no columns (a log-determinant alone) differentiates like the Gram itself."""
    generator = torch.Generator().manual_seed(0)
    root = torch.randn(120, 8, dtype=torch.float64, generator=generator, requires_grad=True)
    noise = (0.1 + torch.rand(noise_columns, dtype=torch.float64, generator=generator)).requires_grad_()
    gram, projection = weighted_gram_projection(root, noise, torch.zeros(120, 0, dtype=torch.float64))
    assert projection.shape == (8, 0)
    weights = torch.randn(8, 8, dtype=torch.float64, generator=generator)
    grads = torch.autograd.grad((gram * weights).sum(), (root, noise))
    expected = torch.autograd.grad((weighted_gram(root, noise) * weights).sum(), (root, noise))
    for got, want in zip(grads, expected, strict=True):
        torch.testing.assert_close(got, want)
