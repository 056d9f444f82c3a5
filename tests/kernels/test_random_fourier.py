"""RandomFourierKernel: GPyTorch's BaseKernelTestCase for every sampler, the tied exact RBF/Matérn kernel, ARD
lengthscales, serialisation, batches, dtypes and devices, and its construction errors."""

from __future__ import annotations

import copy
import math
import pickle
import unittest

import gpytorch
import pytest
import torch
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel

from gprf.kernels import RandomFourierKernel
from gprf.testing import SEED, ExactGPModel, FeatureKernelTestCase, num_dims_of, regression_data, train_by_mll


class TestRandomFourierKernel(FeatureKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return RandomFourierKernel(num_features=64, num_dims=num_dims_of(kwargs, 2), seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return RandomFourierKernel(num_features=64, num_dims=num_dims, ard_num_dims=num_dims, seed=SEED, **kwargs)


class TestOrthogonalFourierKernel(TestRandomFourierKernel):
    def create_kernel_no_ard(self, **kwargs):
        return RandomFourierKernel(64, num_dims_of(kwargs, 2), sampler="orthogonal", seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return RandomFourierKernel(64, num_dims, sampler="orthogonal", ard_num_dims=num_dims, seed=SEED, **kwargs)


class TestStructuredMaternKernel(TestRandomFourierKernel):
    def create_kernel_no_ard(self, **kwargs):
        return RandomFourierKernel(
            64, num_dims_of(kwargs, 2), kernel="matern32", sampler="structured", seed=SEED, **kwargs
        )

    def create_kernel_ard(self, num_dims, **kwargs):
        return RandomFourierKernel(
            64, num_dims, kernel="matern32", sampler="structured", ard_num_dims=num_dims, seed=SEED, **kwargs
        )


class TestQMCKernel(TestRandomFourierKernel):
    def create_kernel_no_ard(self, **kwargs):
        return RandomFourierKernel(64, num_dims_of(kwargs, 2), kernel="matern52", sampler="qmc", seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return RandomFourierKernel(
            64, num_dims, kernel="matern52", sampler="qmc", ard_num_dims=num_dims, seed=SEED, **kwargs
        )


@pytest.fixture
def x64():
    return torch.randn(30, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def _kernel64(**kwargs) -> RandomFourierKernel:
    return RandomFourierKernel(128, num_dims=3, seed=0, **kwargs).double()


def test_ard_lengthscale_scales_inputs(x64):
    kernel = _kernel64(ard_num_dims=3)
    kernel.lengthscale = torch.tensor([[0.5, 2.0, 3.0]], dtype=torch.float64)
    scaled = x64 / kernel.lengthscale
    torch.testing.assert_close(kernel.features(x64), kernel.feature_map(scaled))
    loss = kernel(x64).to_dense().sum()
    loss.backward()
    assert kernel.raw_lengthscale.grad is not None and torch.isfinite(kernel.raw_lengthscale.grad).all()


@pytest.mark.parametrize(
    ("name", "exact_type"), [("rbf", RBFKernel), ("matern12", MaternKernel), ("matern52", MaternKernel)]
)
def test_exact_kernel_is_tied(name, exact_type, x64):
    kernel = RandomFourierKernel(4096, num_dims=3, kernel=name, ard_num_dims=3, seed=0).double()
    exact = kernel.exact()
    assert isinstance(exact, exact_type)
    assert exact.raw_lengthscale is kernel.raw_lengthscale
    kernel.lengthscale = torch.tensor([[1.5, 0.7, 2.0]], dtype=torch.float64)
    torch.testing.assert_close(exact.lengthscale, kernel.lengthscale)
    # The exact kernel is the target: rows of the expectation agree with the feature map's closed form.
    z = x64 / kernel.lengthscale
    torch.testing.assert_close(
        exact(x64[:10], x64[10:20], diag=True),
        kernel.feature_map.expected_kernel(z[:10], z[10:20]),
        rtol=1e-10,
        atol=1e-12,
    )
    if name == "matern52":
        assert exact.nu == 2.5


def test_state_dict_into_fresh_kernel_and_model(x64):
    kernel = _kernel64(ard_num_dims=3)
    kernel.lengthscale = torch.tensor([[0.3, 0.9, 1.7]], dtype=torch.float64)
    fresh = RandomFourierKernel(128, num_dims=3, seed=99, ard_num_dims=3).double()
    fresh.load_state_dict(kernel.state_dict())
    torch.testing.assert_close(fresh(x64).to_dense(), kernel(x64).to_dense())

    class Model(gpytorch.models.ExactGP):
        def __init__(self, covar_module):
            super().__init__(x64, torch.sin(x64).sum(-1), gpytorch.likelihoods.GaussianLikelihood())
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = covar_module

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    model = Model(ScaleKernel(kernel)).double().eval()
    fresh_model = Model(ScaleKernel(RandomFourierKernel(128, num_dims=3, ard_num_dims=3))).double()
    fresh_model.load_state_dict(model.state_dict())
    fresh_model.eval()
    test_x = x64[:7] + 0.1
    torch.testing.assert_close(fresh_model(test_x).mean, model(test_x).mean)


def test_pickle_and_resample(x64):
    kernel = _kernel64()
    clone = pickle.loads(pickle.dumps(kernel))
    torch.testing.assert_close(clone(x64).to_dense(), kernel(x64).to_dense())
    before = kernel(x64).to_dense()
    kernel.resample_features(torch.Generator().manual_seed(5))
    assert not torch.allclose(kernel(x64).to_dense(), before)


def test_batch_kernels_draw_independent_features(x64):
    kernel = RandomFourierKernel(64, num_dims=3, batch_shape=torch.Size([2]), seed=0).double()
    assert kernel.feature_map.frequencies.shape == (2, 3, 32)
    covar = kernel(x64).to_dense()
    assert covar.shape == (2, 30, 30)
    assert not torch.allclose(covar[0], covar[1])
    torch.testing.assert_close(kernel[1](x64).to_dense(), covar[1])
    expanded = RandomFourierKernel(64, num_dims=3, seed=0).double().expand_batch(torch.Size([3]))
    assert expanded(x64).to_dense().shape == (3, 30, 30)


def test_float32_kernel_computes_float64_inputs_in_float64_as_gpytorch_kernels_do(x64):
    kernel = RandomFourierKernel(64, num_dims=3, seed=0).float()
    assert kernel.feature_map.frequencies.dtype == torch.float32
    assert kernel(x64.float()).to_dense().dtype == torch.float32
    # RBFKernel(float32)(float64 inputs) is float64 by torch's type promotion; so is this kernel.
    assert RBFKernel().float()(x64).to_dense().dtype == torch.float64
    promoted = kernel(x64).to_dense()
    assert promoted.dtype == torch.float64 and kernel.feature_map.frequencies.dtype == torch.float32
    # The same numbers up to the float32 lengthscale (its softplus is evaluated in float32 here).
    torch.testing.assert_close(promoted, copy.deepcopy(kernel).double()(x64).to_dense(), rtol=0, atol=1e-7)


def test_float64_data_with_a_float32_kernel_trains_and_predicts_like_rbf():
    """A drop-in kernel behaves as the kernel it replaces: an ExactGP with float64 data and a kernel left in float32."""
    x, y = regression_data(n=60)
    test_x = torch.rand(7, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    for base in (RBFKernel(ard_num_dims=3), RandomFourierKernel(64, num_dims=3, ard_num_dims=3, seed=0)):
        likelihood = gpytorch.likelihoods.GaussianLikelihood()  # float32 parameters, as built
        model = ExactGPModel(x, y, likelihood, ScaleKernel(base.float()))
        losses = train_by_mll(model, x, y, steps=5)
        assert all(math.isfinite(loss) for loss in losses) and losses[-1] < losses[0]
        model.eval()
        with torch.no_grad():
            prediction = likelihood(model(test_x))
        assert prediction.mean.dtype == torch.float64 and bool((prediction.variance > 0).all())


@pytest.mark.parametrize(
    "device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))]
)
def test_device_follows_to(device, x64):
    kernel = _kernel64().to(device)
    assert kernel.feature_map.frequencies.device.type == device
    x = x64.to(device)
    assert kernel(x).to_dense().device.type == device


def test_bad_input_errors(x64):
    with pytest.raises(ValueError, match="even"):
        RandomFourierKernel(63, num_dims=3)
    with pytest.raises(ValueError, match="'rbf'"):
        RandomFourierKernel(64, num_dims=3, kernel="gaussian")
    with pytest.raises(ValueError, match="'qmc'"):
        RandomFourierKernel(64, num_dims=3, sampler="sobol")
    kernel = _kernel64()
    with pytest.raises(ValueError, match="num_dims=4"):
        kernel(torch.zeros(5, 4, dtype=torch.float64)).to_dense()
    bad = x64.clone()
    bad[3, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        kernel(bad).to_dense()


def test_num_features_is_twice_gpytorch_rff_num_samples():
    """The migration rule ``RFFKernel(num_samples=S)`` -> ``RandomFourierKernel(num_features=2 * S)``: given GPyTorch's
    S frequencies, the gprf kernel with 2S real features is the same kernel matrix (both use [cos, sin] / sqrt(S))."""
    num_samples, d = 16, 3
    torch.manual_seed(SEED)
    rff = gpytorch.kernels.RFFKernel(num_samples=num_samples, num_dims=d).double()
    kernel = RandomFourierKernel(num_features=2 * num_samples, num_dims=d, seed=SEED).double()
    with torch.no_grad():
        kernel.feature_map.frequencies.copy_(rff.randn_weights)
        kernel.lengthscale = rff.lengthscale
    x = torch.randn(7, d, dtype=torch.float64)
    torch.testing.assert_close(kernel(x).to_dense(), rff(x).to_dense(), rtol=0, atol=1e-14)
