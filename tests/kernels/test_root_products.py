"""gprf.kernels.root_products: GPyTorch's ProductKernel of two random feature kernels (``ScaleKernel(k1) * k2``)
evaluates to the root of ``k1 * k2`` — the same columns and marginal likelihood (value and gradients) as gprf's
spelling, the joint, permutation and nested products alike — with the same pairing at every evaluation and in deep
copies, its own draws for a repeated factor, chunked roots equal to formed ones, and one warning that GPyTorch's
own cross covariances of such a product do not follow it; a product with a task IndexKernel is exact and silent."""

from __future__ import annotations

import copy
import warnings

import gpytorch
import pytest
import torch
from gpytorch.kernels import IndexKernel, ProductKernel, ScaleKernel

import gprf
from gprf.exceptions import DispatchFallbackWarning
from gprf.kernels import FeatureProductKernel, RandomFourierKernel
from gprf.kernels.root_products import product_of
from gprf.linalg import feature_root
from gprf.testing.models import regression_data
from tests.helpers.models import GprfDistributionGP


def _factors(first_features=32, second_features=32):
    first = RandomFourierKernel(first_features, num_dims=3, ard_num_dims=3, seed=0).double()
    second = RandomFourierKernel(second_features, num_dims=3, kernel="matern52", seed=1).double()
    first.lengthscale = torch.tensor([0.4, 0.7, 1.1], dtype=torch.float64)
    return first, second


def _spellings(first, second):
    """GPyTorch's ``ScaleKernel(k1) * k2`` and gprf's ``ScaleKernel(k1 * k2)`` sharing one outputscale."""
    scaled = ScaleKernel(first).double()
    scaled.outputscale = 1.7
    native = ScaleKernel(first * second).double()
    native.raw_outputscale = scaled.raw_outputscale
    return scaled * second, native


def _loss_and_gradients(kernel, x, y):
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    likelihood.noise = 0.05
    model = GprfDistributionGP(x, y, likelihood, kernel).double()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    loss = -mll(model(x), y)
    parameters = [p for p in kernel.parameters() if p.requires_grad]
    return loss, dict(zip([id(p) for p in parameters], torch.autograd.grad(loss, parameters), strict=True))


@pytest.mark.parametrize("sizes", [(32, 32), (32, 8)], ids=["joint", "permutation"])
def test_scaled_product_is_the_product_kernel_root_with_the_same_likelihood(sizes):
    x, y = regression_data(n=60)
    ours, native = _spellings(*_factors(*sizes))
    assert isinstance(ours, ProductKernel)
    with pytest.warns(DispatchFallbackWarning, match="cross covariances"):
        root = feature_root(ours(x))
    expected_method = "joint" if sizes == (32, 32) else "permutation"
    if expected_method == "permutation":  # the pairing draws are the product's own: give gprf's spelling the same
        native.base_kernel.pairing = product_of(ours.kernels[0].base_kernel, ours.kernels[1]).pairing
    assert product_of(ours.kernels[0].base_kernel, ours.kernels[1]).method == expected_method
    expected = feature_root(native(x))
    assert root.num_columns == expected.num_columns == 32
    torch.testing.assert_close(root.scaled_features(), expected.scaled_features(), rtol=1e-12, atol=1e-12)
    loss, gradients = _loss_and_gradients(ours, x, y)
    native_loss, native_gradients = _loss_and_gradients(native, x, y)
    assert abs(loss.item() - native_loss.item()) < 1e-8
    for key, gradient in gradients.items():
        torch.testing.assert_close(gradient, native_gradients[key], rtol=1e-8, atol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DispatchFallbackWarning)  # warned once per product, not per evaluation
        ours(x).evaluate_kernel()


def test_the_pairing_is_the_same_function_everywhere():
    x, _ = regression_data(n=30)
    ours, _ = _spellings(*_factors(32, 8))
    with pytest.warns(DispatchFallbackWarning):
        full = feature_root(ours(x)).scaled_features()
    # Rows of other evaluations (fewer points, a deep copy such as BoTorch's frozen and fantasy models) have the
    # same features: one pairing per pair of kernels, kept with the kernel.
    torch.testing.assert_close(feature_root(ours(x[:7])).scaled_features(), full[:7], rtol=1e-12, atol=1e-12)
    copied = copy.deepcopy(ours)
    torch.testing.assert_close(feature_root(copied(x)).scaled_features(), full, rtol=1e-12, atol=1e-12)
    # New draws of a factor pair again (and warn again: the product is built anew).
    ours.kernels[1].resample_features(torch.Generator().manual_seed(5))
    with pytest.warns(DispatchFallbackWarning):
        assert not torch.allclose(feature_root(ours(x)).scaled_features(), full)


def test_a_repeated_factor_gets_its_own_draws():
    x, y = regression_data(n=40)
    kernel = RandomFourierKernel(32, num_dims=3, seed=0).double()
    scaled = ScaleKernel(kernel).double()
    with pytest.warns(DispatchFallbackWarning):
        root = feature_root((scaled * kernel)(x))
    factors = product_of(kernel, kernel).kernels
    assert factors[0] is kernel and factors[1] is not kernel
    assert factors[1].raw_lengthscale is kernel.raw_lengthscale  # one lengthscale, trained by both factors
    assert not torch.equal(factors[1].feature_map.frequencies, kernel.feature_map.frequencies)
    native = ScaleKernel(kernel * kernel).double()  # gprf's spelling: the same independent copy (seeded)
    native.raw_outputscale = scaled.raw_outputscale
    torch.testing.assert_close(root.scaled_features(), feature_root(native(x)).scaled_features(), rtol=0, atol=1e-12)


def test_three_factors_and_chunked_roots():
    x, y = regression_data(n=50)
    first, second = _factors()
    third = RandomFourierKernel(32, num_dims=3, kernel="matern12", seed=2).double()
    ours = ScaleKernel(first).double() * second * third
    native = ScaleKernel(first * second * third).double()
    native.raw_outputscale = ours.kernels[0].raw_outputscale
    with pytest.warns(DispatchFallbackWarning):
        root = feature_root(ours(x))
    # The second product pairs a joint product with a Fourier factor by random pairing: the same draws for both.
    native.base_kernel.pairing = product_of(product_of(first, second), third).pairing
    assert root.num_columns == gprf.kernels.root_columns(ours) == 32
    torch.testing.assert_close(root.scaled_features(), feature_root(native(x)).scaled_features(), rtol=0, atol=1e-12)
    loss, gradients = _loss_and_gradients(ours, x, y)
    with gprf.settings.feature_chunk_size(16):  # every factor's root lazy: the product stays lazy
        assert feature_root(ours(x)).is_lazy
        chunked_loss, chunked_gradients = _loss_and_gradients(ours, x, y)
    assert abs(loss.item() - chunked_loss.item()) < 1e-10
    for key, gradient in gradients.items():
        torch.testing.assert_close(chunked_gradients[key], gradient, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("scaled", [False, True])
def test_a_task_factor_enters_exactly_and_silently(scaled):
    x, _ = regression_data(n=24)
    tasks = torch.arange(24).remainder(3).double().unsqueeze(-1)
    points = torch.cat([x, tasks], -1)
    data = RandomFourierKernel(16, num_dims=3, ard_num_dims=3, active_dims=[0, 1, 2], seed=0).double()
    task = IndexKernel(num_tasks=3, rank=1, active_dims=[3]).double()
    with torch.no_grad():
        task.covar_factor.normal_(generator=torch.Generator().manual_seed(1))
    data_module = ScaleKernel(data).double() if scaled else data
    product = ProductKernel(data_module, task)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        root = feature_root(product(points))
    assert root.num_columns == 16 * 3 == gprf.kernels.root_columns(product)
    data_root = feature_root(data_module(points)).scaled_features()
    expected = (data_root @ data_root.mT) * task(points).to_dense()
    scaled_root = root.scaled_features()
    torch.testing.assert_close(scaled_root @ scaled_root.mT, expected, rtol=1e-10, atol=1e-10)


def test_the_product_kernels_follow_the_factors_device_and_dtype():
    x, _ = regression_data(n=20)
    first, second = _factors(32, 8)
    ours = ScaleKernel(first) * second
    with pytest.warns(DispatchFallbackWarning):
        feature_root(ours.double()(x))
    product = product_of(first, second)
    assert product.pairing.device == x.device
    root32 = feature_root(ours.float()(x.float()))
    assert root32.dtype == torch.float32 and product_of(first, second) is product  # moved, not rebuilt
    assert isinstance(product, FeatureProductKernel)
