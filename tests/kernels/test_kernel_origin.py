"""gprf.kernels.kernel_origin: a root's origin featurises its rows again — a kernel's own inputs, or a product's two
factors' inputs side by side — by the kernel or a copy of the same structure, formed or lazy, and two origins of
different input dtypes have no product origin."""

from __future__ import annotations

import copy

import torch

from gprf.kernels import FeatureProductKernel, RandomFourierKernel
from gprf.kernels.kernel_origin import KernelOrigin, product_origin
from gprf.linalg import LazyFeatures


def _origins():
    generator = torch.Generator().manual_seed(0)
    first = RandomFourierKernel(8, num_dims=2, seed=0).double()
    second = RandomFourierKernel(8, num_dims=3, kernel="matern32", seed=1).double()
    x1 = torch.rand(6, 2, generator=generator, dtype=torch.float64)
    x2 = torch.rand(6, 3, generator=generator, dtype=torch.float64)
    return KernelOrigin(first, x1), KernelOrigin(second, x2)


def test_a_kernel_origin_is_the_kernels_features_of_its_inputs():
    first, _ = _origins()
    torch.testing.assert_close(first.features_of(first.inputs), first.kernel.features(first.inputs))
    # Another kernel of the same structure (a copy with its own draws) featurises the same rows.
    redrawn = copy.deepcopy(first.kernel)
    redrawn.resample_features(torch.Generator().manual_seed(9))
    torch.testing.assert_close(first.root_like(redrawn, None), redrawn.features(first.inputs))


def test_a_product_origin_combines_its_factors_roots_formed_or_lazy():
    first, second = _origins()
    product = FeatureProductKernel(first.kernel, second.kernel)  # Kronecker: 64 columns
    origin = product_origin(product, first, second)
    assert origin.inputs.shape == (6, 5) and origin.layout == (2, None, None)
    expected = product.combine([first.kernel.features(first.inputs), second.kernel.features(second.inputs)])
    torch.testing.assert_close(origin.features_of(origin.inputs), expected)
    lazy = origin.root_like(product, LazyFeatures(origin.inputs, lambda rows: rows, 4))
    assert isinstance(lazy, LazyFeatures) and lazy.chunk_size == 4
    torch.testing.assert_close(lazy.materialize(), expected)


def test_origins_of_different_input_dtypes_have_no_product_origin():
    first, second = _origins()
    mixed = KernelOrigin(second.kernel, second.inputs.float())
    assert product_origin(FeatureProductKernel(first.kernel, second.kernel), first, mixed) is None
