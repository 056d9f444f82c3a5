"""The approximation registry behind ``gprf compare --methods`` (gprf.cli.approximations)."""

from __future__ import annotations

import pytest
import torch

from gprf.cli.approximations import (
    APPROXIMATIONS,
    Approximation,
    ApproximationRequest,
    methods_for_kernel,
    register,
)
from gprf.cli.compare import parse_methods
from gprf.cli.options import CLIError
from gprf.kernels import RandomFeatureKernel


def _request(kernel: str = "rbf", dtype: torch.dtype = torch.float64) -> ApproximationRequest:
    x = torch.randn(20, 3, generator=torch.Generator().manual_seed(0), dtype=dtype)
    return ApproximationRequest(16, 3, kernel, seed=7, train_x=x, lengthscale=torch.ones(1, 3, dtype=dtype))


def test_fourier_samplers_are_registered_for_every_stationary_kernel():
    assert list(APPROXIMATIONS)[:4] == ["rff", "orf", "sorf", "qmc"]
    for kernel in ("rbf", "matern12", "matern32", "matern52"):
        assert {"rff", "orf", "sorf", "qmc"} <= set(methods_for_kernel(kernel))


@pytest.mark.parametrize("name", ["rff", "orf", "sorf", "qmc"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_factories_build_seeded_kernels_on_the_request_dtype(name, dtype):
    request = _request("matern32", dtype)
    kernel = APPROXIMATIONS[name].build(request)
    assert isinstance(kernel, RandomFeatureKernel)
    assert kernel.num_features == 16 and kernel.lengthscale.shape == (1, 3)
    features = kernel.features(request.train_x)
    assert features.dtype == dtype and features.shape == (20, 16)
    torch.testing.assert_close(APPROXIMATIONS[name].build(request).features(request.train_x), features)


def test_register_rejects_duplicates_and_bad_names():
    with pytest.raises(ValueError, match="already registered"):
        register(Approximation("rff", "again", APPROXIMATIONS["rff"].factory))
    with pytest.raises(ValueError, match="Invalid approximation name"):
        register(Approximation("a,b", "comma", APPROXIMATIONS["rff"].factory))


MACLAURIN_METHODS = ["maclaurin-rad", "maclaurin-srht", "maclaurin-srht-complex"]


def test_maclaurin_methods_are_registered_for_the_rbf_kernel_only():
    assert set(MACLAURIN_METHODS) <= set(methods_for_kernel("rbf"))
    for kernel in ("matern12", "matern32", "matern52"):
        assert not set(MACLAURIN_METHODS) & set(methods_for_kernel(kernel))
    with pytest.raises(CLIError, match="F >= 3"):
        parse_methods("maclaurin-srht", "rbf", 2)


@pytest.mark.parametrize("name", MACLAURIN_METHODS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_maclaurin_factories_optimize_the_allocation_at_the_request_lengthscale(name, dtype):
    from gprf.features import optimize_maclaurin_allocation

    x = torch.randn(40, 3, generator=torch.Generator().manual_seed(1), dtype=dtype)
    lengthscale = torch.tensor([[0.5, 1.0, 2.0]], dtype=dtype)
    request = ApproximationRequest(24, 3, "rbf", seed=7, train_x=x, lengthscale=lengthscale)
    kernel = APPROXIMATIONS[name].build(request)
    assert isinstance(kernel, RandomFeatureKernel)
    torch.testing.assert_close(kernel.lengthscale, lengthscale)
    scaled = (x / lengthscale).double()
    sketch = "rademacher" if name == "maclaurin-rad" else "srht"
    expected = optimize_maclaurin_allocation(
        scaled - scaled.mean(0), 24, kernel="gaussian", sketch=sketch, complex=name.endswith("complex")
    )
    assert kernel.feature_map.counts == expected.counts
    torch.testing.assert_close(kernel.feature_map.center, scaled.mean(0).to(dtype))
    features = kernel.features(x)
    assert features.dtype == dtype
    assert features.shape == (40, 48 if name.endswith("complex") else 24)  # complex: 2F real columns
    torch.testing.assert_close(APPROXIMATIONS[name].build(request).features(x), features)


def test_maclaurin_factories_centre_on_every_training_row():
    # The O(n^2) allocation statistics subsample to 1000 rows inside the library; the centre uses all rows.
    x = torch.randn(1100, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    request = ApproximationRequest(8, 2, "rbf", seed=0, train_x=x, lengthscale=torch.ones(1, 2, dtype=torch.float64))
    kernel = APPROXIMATIONS["maclaurin-rad"].build(request)
    torch.testing.assert_close(kernel.feature_map.center, x.mean(0))
