"""gprf.botorch.prior: prior path weights with one quasi-random point per path — standard normal and uncorrelated
for every output of a batched model, iid normals beyond Sobol's dimension limit, broadcast over the data batch
beyond the kernel's — and the prior paths of BoTorch's sampler for a gprf model: the kernel's root with those weights,
the model's mean and transforms, or a caller's feature map and weights called as BoTorch calls them."""

from __future__ import annotations

import math

import pytest
import torch
from botorch.sampling.pathwise import draw_kernel_feature_paths
from torch.quasirandom import SobolEngine

from gprf.botorch import KernelRootFeatureMap, path_weights
from gprf.botorch.prior import broadcast_over_data_batch, kernel_feature_paths
from tests.botorch.conftest import make_botorch_model

pytestmark = pytest.mark.botorch


NUM_PATHS = 20_000


Z_BOUND = 5.0


def test_path_weights_are_unbiased_per_output():
    torch.manual_seed(0)
    weights = path_weights(torch.Size([NUM_PATHS, 2, 8]), batch_ndim=1)
    assert weights.shape == (NUM_PATHS, 2, 8)
    z = weights.mean(0) / math.sqrt(1 / NUM_PATHS)
    assert z.abs().max() < Z_BOUND
    z_variance = (weights.var(0) - 1) / math.sqrt(2 / (NUM_PATHS - 1))
    assert z_variance.abs().max() < Z_BOUND


def test_weights_of_different_outputs_are_uncorrelated():
    """BoTorch's strided Sobol draws correlate the outputs' weights; one Sobol point per path does not.

    The sample correlation of independent standard normals is approximately N(0, 1 / S).
    """
    torch.manual_seed(1)
    weights = path_weights(torch.Size([NUM_PATHS, 2, 4]), batch_ndim=1)
    first, second = weights[:, 0, :], weights[:, 1, :]
    correlation = (first * second).mean(0) / (first.std(0) * second.std(0))
    assert correlation.abs().max() < Z_BOUND / math.sqrt(NUM_PATHS)


def test_beyond_sobols_dimensions_the_weights_are_iid_normals():
    shape = torch.Size([3, SobolEngine.MAXDIM + 1])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(2)
        weights = path_weights(shape, batch_ndim=0)
        torch.manual_seed(2)
        expected = torch.randn(shape, dtype=torch.float64)
    torch.testing.assert_close(weights, expected, rtol=0, atol=0)


def test_prior_weights_broadcast_over_the_data_batch_beyond_the_kernels():
    weight = torch.randn(4, 2, 8, generator=torch.Generator().manual_seed(0), dtype=torch.float64)  # S x [m] x F
    # Three fantasies of a two-output model: data batch [3, 2], kernel batch [2].
    broadcast = broadcast_over_data_batch(weight, torch.Size([2]), torch.Size([3, 2]))
    assert broadcast.shape == (4, 1, 2, 8)
    torch.testing.assert_close(broadcast.squeeze(1), weight, rtol=0, atol=0)
    assert broadcast_over_data_batch(weight, torch.Size([2]), torch.Size([2])).shape == (4, 2, 8)


def _root_and_mean(model, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's scaled root and the mean at ``x``, in the model's transformed space."""
    with torch.no_grad():
        z = model.transform_inputs(x)
        return model.covar_module.features(z), model.mean_module(z)


def test_prior_paths_of_botorchs_sampler_are_the_kernels_root_with_gprfs_weights():
    model = make_botorch_model(n=20, num_features=16).eval()
    with torch.no_grad():
        model.mean_module.constant.fill_(0.6)
    x = torch.rand(5, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        paths = draw_kernel_feature_paths(model, torch.Size([4]))
        torch.manual_seed(3)
        weights = path_weights(torch.Size([4, 16]), batch_ndim=0)
    assert isinstance(paths.feature_map, KernelRootFeatureMap)
    torch.testing.assert_close(paths.weight, weights, rtol=0, atol=0)
    root, mean = _root_and_mean(model, x)
    transform = model.outcome_transform
    expected = transform.means.squeeze() + transform.stdvs.squeeze() * (mean + weights @ root.mT)
    torch.testing.assert_close(paths(x), expected, rtol=1e-12, atol=1e-12)
    # Without the outcome untransform (the prior part of a Matheron path): the standardized values.
    torch.manual_seed(3)
    standardized = kernel_feature_paths(model, torch.Size([4]), untransform_outcomes=False)
    torch.testing.assert_close(standardized(x), mean + weights @ root.mT, rtol=1e-12, atol=1e-12)


def test_a_callers_map_and_weight_generators_are_called_as_botorch_calls_them():
    model = make_botorch_model(n=20, num_features=16).eval()
    calls = []

    def map_generator(kernel, num_inputs, num_outputs):
        calls.append((kernel, num_inputs, num_outputs))
        return KernelRootFeatureMap(kernel)

    paths = draw_kernel_feature_paths(
        model,
        torch.Size([2]),
        num_features=7,
        map_generator=map_generator,
        weight_generator=lambda shape: torch.full(shape, 0.5),
    )
    assert calls == [(model.covar_module, 3, 7)]  # BoTorch's untransformed width and the requested count
    assert paths.weight.dtype == torch.float64 and torch.equal(
        paths.weight, torch.full((2, 16), 0.5, dtype=torch.float64)
    )
    x = torch.rand(5, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    root, mean = _root_and_mean(model, x)
    transform = model.outcome_transform
    expected = transform.means.squeeze() + transform.stdvs.squeeze() * (mean + 0.5 * root.sum(-1))
    torch.testing.assert_close(paths(x), expected.expand(2, 5), rtol=1e-12, atol=1e-12)
