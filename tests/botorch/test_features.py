"""gprf.botorch.features: BoTorch's pathwise feature map of a gprf kernel is the kernel's own feature root (amplitude
and active_dims included, also of a ScaleKernel's, whatever feature count BoTorch asks for), kept as it was when the
map was built; other ScaleKernels keep BoTorch's generator; kernels whose paths cannot follow the posterior are
refused."""

from __future__ import annotations

import pytest
import torch
from botorch.sampling.pathwise.features import gen_kernel_features
from gpytorch.kernels import RBFKernel, ScaleKernel

from gprf.botorch import KernelRootFeatureMap
from gprf.botorch.dispatch import botorch_scale_kernel_features
from gprf.botorch.features import gen_root_features
from gprf.kernels import PolynomialSketchKernel, RandomFourierKernel

pytestmark = pytest.mark.botorch


def test_kernel_root_feature_map_is_the_kernel_root():
    kernel = RandomFourierKernel(16, num_dims=2, ard_num_dims=2, seed=0, active_dims=torch.tensor([0, 2])).double()
    kernel.lengthscale = torch.tensor([0.5, 2.0], dtype=torch.float64)
    scaled = ScaleKernel(kernel).double()
    scaled.outputscale = 3.0
    feature_map = gen_kernel_features(scaled, num_inputs=3, num_outputs=1024)
    x = torch.rand(5, 3, dtype=torch.float64)
    features = feature_map(x)
    assert isinstance(feature_map, KernelRootFeatureMap) and feature_map.num_outputs == 16
    torch.testing.assert_close(features @ features.mT, scaled(x).to_dense(), rtol=0, atol=1e-12)


def test_the_map_keeps_the_kernel_it_was_built_with_and_its_batches():
    kernel = ScaleKernel(
        RandomFourierKernel(8, num_dims=2, batch_shape=torch.Size([3]), seed=0), batch_shape=torch.Size([3])
    )
    kernel = kernel.double()
    kernel.outputscale = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    feature_map = gen_root_features(kernel, num_inputs=2, num_outputs=100)
    assert feature_map.batch_shape == torch.Size([3]) and feature_map.num_outputs == 8
    x = torch.rand(4, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    expected = kernel(x).to_dense()
    # A new draw and new hyperparameters of the kernel do not reach a map (nor the paths) already built on it.
    kernel.base_kernel.resample_features(torch.Generator().manual_seed(2))
    kernel.outputscale = torch.tensor([4.0, 4.0, 4.0], dtype=torch.float64)
    kernel.base_kernel.lengthscale = 3.0
    features = feature_map(x)
    assert features.shape == (3, 4, 8)
    torch.testing.assert_close(features @ features.mT, expected, rtol=0, atol=1e-12)
    assert (expected - kernel(x).to_dense()).abs().max() > 0.1
    assert not any(tensor.requires_grad for tensor in feature_map.parameters())


@pytest.mark.parametrize("nested", [False, True])
def test_botorch_generator_on_a_scale_kernel_with_active_dims_gives_the_whole_root(nested):
    inner = RandomFourierKernel(16, num_dims=2, seed=0)
    scaled = ScaleKernel(ScaleKernel(inner) if nested else inner, active_dims=torch.tensor([0, 2])).double()
    scaled.outputscale = 2.5
    feature_map = gen_kernel_features(scaled, num_inputs=3, num_outputs=16)
    x = torch.rand(5, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    features = feature_map(x)
    assert isinstance(feature_map, KernelRootFeatureMap) and features.shape == (5, 16)
    torch.testing.assert_close(features @ features.mT, scaled(x).to_dense(), rtol=0, atol=1e-12)


def test_other_scale_kernels_keep_botorchs_generator():
    kernel = ScaleKernel(RBFKernel(), active_dims=torch.tensor([0, 2])).double()
    x = torch.rand(5, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        ours = gen_kernel_features(kernel, num_inputs=3, num_outputs=64)(x)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        theirs = botorch_scale_kernel_features(kernel, num_inputs=3, num_outputs=64)(x)
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


def test_kernels_without_real_posterior_paths_are_refused():
    with pytest.raises(TypeError, match="RBFKernel has no finite feature map"):
        KernelRootFeatureMap(ScaleKernel(RBFKernel()))
    complex_posterior = PolynomialSketchKernel(8, num_dims=2, complex=True, posterior="complex", seed=0)
    with pytest.raises(NotImplementedError, match="posterior='complex'"):
        KernelRootFeatureMap(complex_posterior)
    # A complex map with the real-part kernel's posterior is an ordinary real feature model.
    real_part = PolynomialSketchKernel(8, num_dims=2, complex=True, seed=0)
    assert KernelRootFeatureMap(real_part).num_outputs == 16
