"""gprf.linalg.chunked_gram: the Gram matrix and projection summed over row chunks equal the unchunked ones, their
gradients (gradcheck) reach the inputs, noise, right-hand sides and the parameters inside the feature function, and
nothing of size N x F is saved for the backward pass."""

from __future__ import annotations

import pytest
import torch

from gprf.kernels import RandomFourierKernel
from gprf.linalg import weighted_gram_projection
from gprf.linalg.chunked_gram import chunked_gram_projection


def _kernel() -> RandomFourierKernel:
    kernel = RandomFourierKernel(6, num_dims=2, ard_num_dims=2, seed=0).double()
    kernel.lengthscale = torch.tensor([0.7, 1.3], dtype=torch.float64)
    return kernel


def _data(n=13, batch=(), noise_columns=None, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(*batch, n, 2, generator=generator, dtype=torch.float64)
    noise = 0.2 + torch.rand(*batch, noise_columns or n, generator=generator, dtype=torch.float64)
    rhs = torch.randn(*batch, n, 2, generator=generator, dtype=torch.float64)
    return x, noise, rhs


@pytest.mark.parametrize("chunk_size", [1, 4, 5, 13, 100])
@pytest.mark.parametrize("noise_columns", [None, 1], ids=["heteroscedastic", "constant"])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_chunked_sums_equal_the_unchunked_ones(chunk_size, noise_columns, batch):
    kernel = _kernel()
    x, noise, rhs = _data(batch=batch, noise_columns=noise_columns)
    gram, projection = chunked_gram_projection(
        x, kernel.features, noise, rhs, chunk_size=chunk_size, product_dtype=torch.float64
    )
    expected_gram, expected_projection = weighted_gram_projection(kernel.features(x), noise, rhs)
    torch.testing.assert_close(gram, expected_gram, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(projection, expected_projection, rtol=1e-10, atol=1e-10)
    gram_only, none = chunked_gram_projection(
        x, kernel.features, noise, None, chunk_size=4, product_dtype=torch.float64
    )
    assert none is None
    torch.testing.assert_close(gram_only, expected_gram, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("noise_columns", [None, 1], ids=["heteroscedastic", "constant"])
def test_gradcheck_through_inputs_noise_rhs_and_the_lengthscale(noise_columns):
    kernel = _kernel()
    x, noise, rhs = _data(n=7, batch=(2,), noise_columns=noise_columns)
    raw_lengthscale = kernel.raw_lengthscale

    def sums(x, noise, rhs, raw_lengthscale):
        # gradcheck perturbs raw_lengthscale in place: the kernel's features see every perturbation.
        return chunked_gram_projection(
            x, kernel.features, noise, rhs, chunk_size=3, product_dtype=torch.float64, params=(raw_lengthscale,)
        )

    inputs = (x.requires_grad_(True), noise.requires_grad_(True), rhs.requires_grad_(True), raw_lengthscale)
    assert torch.autograd.gradcheck(sums, inputs)


def test_gradients_equal_autograd_through_the_formed_root():
    """Parameters reached only through the feature function get the same gradient as through the formed root."""
    kernel = _kernel()
    x, noise, rhs = _data(n=11)
    params = [kernel.raw_lengthscale, noise.requires_grad_(True)]
    gram, projection = chunked_gram_projection(
        x, kernel.features, noise, rhs, chunk_size=4, product_dtype=torch.float64, params=(kernel.raw_lengthscale,)
    )
    weights = torch.randn(6, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    loss = (gram * weights).sum() + projection.square().sum()
    grads = torch.autograd.grad(loss, params)
    expected_gram, expected_projection = weighted_gram_projection(kernel.features(x), noise, rhs)
    expected = torch.autograd.grad((expected_gram * weights).sum() + expected_projection.square().sum(), params)
    for actual, reference in zip(grads, expected, strict=True):
        torch.testing.assert_close(actual, reference, rtol=1e-10, atol=1e-12)


def test_exact_products_of_float32_features_match_float64_arithmetic():
    generator = torch.Generator().manual_seed(4)
    root32 = torch.randn(50, 8, generator=generator)
    noise = torch.full((1,), 1e-3, dtype=torch.float64)
    gram, _ = chunked_gram_projection(root32, None, noise, None, chunk_size=16, product_dtype=torch.float64)
    root64 = root32.double()
    torch.testing.assert_close(gram, root64.mT @ root64 / 1e-3, rtol=1e-12, atol=0)


def test_gradient_of_the_gram_alone_of_float32_features_in_float64_products():
    """No right-hand sides (a preconditioner's log-determinant): the backward pass adds an empty projection term."""
    generator = torch.Generator().manual_seed(5)
    root32 = torch.randn(2, 40, 6, generator=generator).requires_grad_(True)
    noise = torch.full((2, 1), 1e-2, dtype=torch.float64)
    weights = torch.randn(6, 6, generator=generator, dtype=torch.float64)
    gram, _ = chunked_gram_projection(root32, None, noise, None, chunk_size=16, product_dtype=torch.float64)
    (grad,) = torch.autograd.grad((gram * weights).sum(), root32)
    root64 = root32.detach().double().requires_grad_(True)
    (expected,) = torch.autograd.grad(((root64.mT @ root64 / 1e-2) * weights).sum(), root64)
    torch.testing.assert_close(grad, expected.float(), rtol=1e-6, atol=1e-6)


def test_nothing_of_size_n_by_f_is_saved_for_backward():
    """Saved bytes of one forward pass stay below a quarter of the root's (N x F), unlike autograd through it."""
    kernel = RandomFourierKernel(64, num_dims=2, seed=0).double()
    x, noise, rhs = _data(n=2000)
    root_bytes = 2000 * kernel.root_dim * 8
    saved = []

    def pack(tensor):
        saved.append(tensor.numel() * tensor.element_size())
        return tensor

    params = tuple(kernel.parameters())
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        chunked_gram_projection(
            x, kernel.features, noise, rhs, chunk_size=256, product_dtype=torch.float64, params=params
        )
    chunked_bytes = sum(saved)
    saved.clear()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        weighted_gram_projection(kernel.features(x), noise, rhs)
    assert chunked_bytes < root_bytes / 4 < sum(saved)


def test_bad_arguments_are_named():
    kernel = _kernel()
    x, noise, rhs = _data()
    with pytest.raises(ValueError, match="chunk_size must be a positive"):
        chunked_gram_projection(x, kernel.features, noise, rhs, chunk_size=0, product_dtype=torch.float64)
    with pytest.raises(ValueError, match=r"noise must have shape \(\.\.\., 13\)"):
        chunked_gram_projection(x, kernel.features, noise[:5], rhs, chunk_size=4, product_dtype=torch.float64)
