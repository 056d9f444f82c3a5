"""gprf.conversion.registry: translations are found along the method resolution order, new kernel types can be
registered, and unregistered kernels get a TypeError naming their path and an alternative."""

from __future__ import annotations

import pytest
import torch
from botorch.models.kernels.positive_index import PositiveIndexKernel
from gpytorch.kernels import CosineKernel, IndexKernel, Kernel, RBFKernel

import gprf
from gprf.conversion import find_translation, register_translation
from gprf.conversion.leaves import translate_fourier, translate_index
from gprf.conversion.registry import _TRANSLATIONS
from gprf.kernels import LinearFeatureKernel


def test_subclasses_use_their_bases_translation():
    assert find_translation(PositiveIndexKernel) is translate_index
    assert find_translation(IndexKernel) is translate_index
    assert find_translation(type("MyRBF", (RBFKernel,), {})) is translate_fourier
    assert find_translation(CosineKernel) is None


def test_registering_a_translation_for_a_new_kernel_type():
    class Identity(Kernel):
        def forward(self, x1, x2, diag=False, **params):
            return (x1 * x2).sum(-1) if diag else x1 @ x2.mT

    @register_translation(Identity)
    def _(kernel, context):
        return LinearFeatureKernel(num_dims=context.num_dims)

    try:
        approximation = gprf.random_features(Identity() + RBFKernel(), 10, num_dims=2, seed=0)
        x = torch.randn(4, 2)
        torch.testing.assert_close(approximation.kernels[0](x).to_dense(), 0.6931 * x @ x.mT, rtol=1e-3, atol=1e-4)
    finally:
        del _TRANSLATIONS[Identity]


def test_unregistered_kernels_name_their_path():
    with pytest.raises(TypeError, match=r"kernels\.0: CosineKernel has no random-feature translation; use RBFKernel"):
        gprf.random_features(CosineKernel() + RBFKernel(), 10, num_dims=2)
