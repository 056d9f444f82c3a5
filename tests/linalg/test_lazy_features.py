"""gprf.linalg.lazy_features: a root kept as inputs and feature function — its shape without forming it, the formed
root, row slices, detaching, rebuilding from its representation, the chunked non-finite row check and sums."""

from __future__ import annotations

import pytest
import torch

import gprf
from gprf.kernels import RandomFourierKernel
from gprf.linalg import LazyFeatures, weighted_gram_projection


def _lazy(n=10, chunk_size=4):
    kernel = RandomFourierKernel(8, num_dims=2, seed=0, batch_shape=torch.Size([3])).double()
    x = torch.rand(n, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return kernel, x, LazyFeatures(x, kernel.features, chunk_size, tuple(kernel.parameters()))


def test_shape_materialize_rows_and_detach():
    kernel, x, lazy = _lazy()
    assert lazy.shape == (3, 10, kernel.root_dim) and lazy.dtype == torch.float64 and lazy.requires_grad
    torch.testing.assert_close(lazy.materialize(), kernel.features(x))
    assert lazy.materialize() is lazy.materialize()  # formed once
    torch.testing.assert_close(lazy.rows(slice(2, 7)).materialize(), kernel.features(x[2:7]))
    detached = lazy.detach()
    assert not detached.requires_grad and not detached.materialize().requires_grad
    rebuilt = lazy.representation_tree()(*(t + 1 for t in lazy.representation()))
    torch.testing.assert_close(rebuilt.materialize(), kernel.features(x + 1))


def test_sums_and_nonfinite_rows_chunk_by_chunk():
    kernel, x, lazy = _lazy(n=11, chunk_size=3)
    noise = torch.full((3, 1), 0.3, dtype=torch.float64)
    rhs = torch.randn(11, 1, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    gram, projection = lazy.weighted_sums(noise, rhs, torch.float64, torch.float64)
    expected_gram, expected_projection = weighted_gram_projection(kernel.features(x), noise, rhs.expand(3, 11, 1))
    torch.testing.assert_close(gram, expected_gram, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(projection, expected_projection, rtol=1e-10, atol=1e-10)
    x[[4, 9], 0] = float("nan")
    with gprf.settings.validate_inputs(False):
        bad = LazyFeatures(x, kernel.features, 3).nonfinite_rows()
    assert bad.shape == (3, 11) and bad.sum(-1).tolist() == [2, 2, 2] and bool(bad[:, [4, 9]].all())


def test_bad_arguments_are_named():
    kernel, x, _ = _lazy()
    with pytest.raises(ValueError, match="chunk_size must be a positive"):
        LazyFeatures(x, kernel.features, 0)
    with pytest.raises(ValueError, match=r"inputs must have shape \(\.\.\., N, d\)"):
        LazyFeatures(x[:0], kernel.features, 4)
