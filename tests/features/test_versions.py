"""gprf.features.versions: draw versions, state stamps that change with every in-place write or new draw (and not
otherwise), and writes through ``.data`` made visible."""

from __future__ import annotations

import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from gprf.features.versions import feature_versions, mark_written, state_versions
from gprf.kernels import RandomFourierKernel


def test_feature_versions_list_every_map_and_follow_the_draws():
    first, second = RandomFourierKernel(4, num_dims=2, seed=0), RandomFourierKernel(4, num_dims=2, seed=1)
    versions = feature_versions(first + second)
    assert versions == (first.feature_map.draw_version, second.feature_map.draw_version)
    second.resample_features()
    assert feature_versions(first + second)[1] != versions[1]
    assert feature_versions(RBFKernel()) == ()


def test_state_stamps_change_with_writes_and_draws_only():
    kernel = ScaleKernel(RandomFourierKernel(4, num_dims=2, seed=0)).double()
    stamp = state_versions(kernel)
    kernel(torch.rand(3, 2, dtype=torch.float64)).to_dense()  # evaluating writes nothing
    assert state_versions(kernel) == stamp
    with torch.no_grad():
        kernel.raw_outputscale.add_(1.0)  # an in-place write (an optimizer step is one)
    assert state_versions(kernel) != stamp
    stamp = state_versions(kernel)
    kernel.base_kernel.resample_features(torch.Generator().manual_seed(1))
    assert state_versions(kernel) != stamp
    stamp = state_versions(kernel)
    kernel.raw_outputscale = torch.nn.Parameter(kernel.raw_outputscale.detach().clone())  # another tensor
    assert state_versions(kernel) != stamp
    assert state_versions(None, kernel) == state_versions(kernel)


def test_writes_through_data_are_made_visible():
    exact = RBFKernel()
    stamp = state_versions(exact)
    exact.lengthscale = 0.3  # GPyTorch writes through .data: no counter sees it
    assert state_versions(exact) == stamp
    mark_written(exact, ["raw_lengthscale", "lengthscale", "base.raw_x"])  # properties and paths are skipped
    assert state_versions(exact) != stamp
    torch.testing.assert_close(exact.lengthscale, torch.tensor([[0.3]]))  # the value is untouched
    gprf_kernel = RandomFourierKernel(4, num_dims=2, seed=0)
    stamp = state_versions(gprf_kernel)
    gprf_kernel.lengthscale = 0.3  # gprf kernels mark their setters' writes
    assert state_versions(gprf_kernel) != stamp


def test_inference_tensors_have_no_counter():
    with torch.inference_mode():
        kernel = RBFKernel()
    assert state_versions(kernel)[0][1][0][1] is None
    mark_written(kernel, ["raw_lengthscale"])  # skipped, not an error
