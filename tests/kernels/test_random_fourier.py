"""Contract tests of RandomFourierKernel (GPyTorch's BaseKernelTestCase plus gprf specifics)."""

from __future__ import annotations

import copy
import math
import pickle
import unittest

import gpytorch
import pytest
import torch
from gpytorch.kernels import MaternKernel, RBFKernel, ScaleKernel
from gpytorch.test.base_kernel_test_case import BaseKernelTestCase
from linear_operator.operators import LowRankRootLinearOperator, MatmulLinearOperator

from gprf.kernels import FeatureSumKernel, RandomFourierKernel
from tests.prediction.conftest import ExactModel, make_data, train_by_mll

# A fixed seed makes two separately constructed kernels share their frequencies, which
# BaseKernelTestCase needs when it compares a kernel with active_dims against a plain one.
SEED = 1234


def _num_dims(kwargs: dict, default: int) -> int:
    """The input dimension of a test kernel: explicit, else that of its active dims, else ``default``."""
    if "num_dims" in kwargs:
        return kwargs.pop("num_dims")
    active_dims = kwargs.get("active_dims")
    return len(active_dims) if active_dims is not None else default


class RandomFeatureKernelTestCase(BaseKernelTestCase):
    """BaseKernelTestCase for kernels that need their input dimension at construction.

    GPyTorch's active-dims tests build the reference kernel without arguments and let it infer its
    dimension on first use; random-feature kernels draw their features in ``__init__``, so the two
    tests are repeated here with the reference kernel built for the selected columns.
    """

    def _check_active_dims(self, active_dims):
        x = self.create_data_no_batch()
        kernel = self.create_kernel_no_ard(active_dims=active_dims)
        reference = self.create_kernel_no_ard(num_dims=len(active_dims))
        self.assertAllClose(
            kernel(x).evaluate_kernel().to_dense(),
            reference(x[:, active_dims]).evaluate_kernel().to_dense(),
            rtol=1e-3,
            atol=1e-5,
        )

    def test_active_dims_list(self):
        self._check_active_dims([0, 2, 4, 6])

    def test_active_dims_range(self):
        self._check_active_dims(list(range(3, 9)))


class TestRandomFourierKernel(RandomFeatureKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return RandomFourierKernel(num_features=64, num_dims=_num_dims(kwargs, 2), seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return RandomFourierKernel(num_features=64, num_dims=num_dims, ard_num_dims=num_dims, seed=SEED, **kwargs)


class TestOrthogonalFourierKernel(TestRandomFourierKernel):
    def create_kernel_no_ard(self, **kwargs):
        return RandomFourierKernel(64, _num_dims(kwargs, 2), sampler="orthogonal", seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return RandomFourierKernel(64, num_dims, sampler="orthogonal", ard_num_dims=num_dims, seed=SEED, **kwargs)


class TestStructuredMaternKernel(TestRandomFourierKernel):
    def create_kernel_no_ard(self, **kwargs):
        return RandomFourierKernel(64, _num_dims(kwargs, 2), kernel="matern32", sampler="structured", seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return RandomFourierKernel(
            64, num_dims, kernel="matern32", sampler="structured", ard_num_dims=num_dims, seed=SEED, **kwargs
        )


class TestQMCKernel(TestRandomFourierKernel):
    def create_kernel_no_ard(self, **kwargs):
        return RandomFourierKernel(64, _num_dims(kwargs, 2), kernel="matern52", sampler="qmc", seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return RandomFourierKernel(
            64, num_dims, kernel="matern52", sampler="qmc", ard_num_dims=num_dims, seed=SEED, **kwargs
        )


@pytest.fixture
def x64():
    return torch.randn(30, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


def _kernel64(**kwargs) -> RandomFourierKernel:
    return RandomFourierKernel(128, num_dims=3, seed=0, **kwargs).double()


def test_structure_of_evaluations(x64):
    kernel = _kernel64()
    assert isinstance(kernel(x64).evaluate_kernel(), LowRankRootLinearOperator)
    assert isinstance(kernel(x64, x64[:5]).evaluate_kernel(), MatmulLinearOperator)
    # Equal values in a different tensor are recognised as the same points.
    assert isinstance(kernel(x64, x64.clone()).evaluate_kernel(), LowRankRootLinearOperator)
    features = kernel.features(x64)
    torch.testing.assert_close(kernel(x64).to_dense(), features @ features.mT)
    torch.testing.assert_close(kernel(x64, diag=True), (features**2).sum(-1))


def test_ard_lengthscale_scales_inputs(x64):
    kernel = _kernel64(ard_num_dims=3)
    kernel.lengthscale = torch.tensor([[0.5, 2.0, 3.0]], dtype=torch.float64)
    scaled = x64 / kernel.lengthscale
    torch.testing.assert_close(kernel.features(x64), kernel.feature_map(scaled))
    loss = kernel(x64).to_dense().sum()
    loss.backward()
    assert kernel.raw_lengthscale.grad is not None and torch.isfinite(kernel.raw_lengthscale.grad).all()


@pytest.mark.parametrize(("name", "exact_type"), [("rbf", RBFKernel), ("matern12", MaternKernel), ("matern52", MaternKernel)])
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
        exact(x64[:10], x64[10:20], diag=True), kernel.feature_map.expected_kernel(z[:10], z[10:20]), rtol=1e-10, atol=1e-12
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
    x, y = make_data(n=60)
    test_x = torch.rand(7, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    for base in (RBFKernel(ard_num_dims=3), RandomFourierKernel(64, num_dims=3, ard_num_dims=3, seed=0)):
        likelihood = gpytorch.likelihoods.GaussianLikelihood()  # float32 parameters, as built
        model = ExactModel(x, y, likelihood, ScaleKernel(base.float()))
        losses = train_by_mll(model, x, y, steps=5)
        assert all(math.isfinite(loss) for loss in losses) and losses[-1] < losses[0]
        model.eval()
        with torch.no_grad():
            prediction = likelihood(model(test_x))
        assert prediction.mean.dtype == torch.float64 and bool((prediction.variance > 0).all())


def test_inputs_with_the_wrong_number_of_columns_get_a_clear_error(x64):
    kernel = RandomFourierKernel(16, num_dims=3, seed=0).double()
    with pytest.raises(ValueError, match=r"built for inputs with 3 columns.*num_dims=2"):
        kernel.features(x64[:, :2])
    with pytest.raises(ValueError, match="3 columns"):
        ScaleKernel(kernel)(x64[:, :2]).to_dense()


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA"))])
def test_device_follows_to(device, x64):
    kernel = _kernel64().to(device)
    assert kernel.feature_map.frequencies.device.type == device
    x = x64.to(device)
    assert kernel(x).to_dense().device.type == device


def test_feature_sum_keeps_one_root(x64):
    k1 = ScaleKernel(RandomFourierKernel(64, num_dims=3, seed=0)).double()
    k2 = ScaleKernel(RandomFourierKernel(32, num_dims=3, kernel="matern32", seed=1)).double()
    k1.outputscale, k2.outputscale = 2.0, 0.5
    total = FeatureSumKernel(k1, k2)
    covar = total(x64).evaluate_kernel()
    assert isinstance(covar, LowRankRootLinearOperator) and covar.root.shape[-1] == 96
    torch.testing.assert_close(covar.to_dense(), k1(x64).to_dense() + k2(x64).to_dense())
    direct = k1.base_kernel + k2.base_kernel
    assert isinstance(direct, FeatureSumKernel)
    torch.testing.assert_close(
        direct(x64).to_dense(), k1.base_kernel(x64).to_dense() + k2.base_kernel(x64).to_dense()
    )


def test_bad_input_errors(x64):
    with pytest.raises(ValueError, match="even"):
        RandomFourierKernel(63, num_dims=3)
    with pytest.raises(ValueError, match="'rbf'"):
        RandomFourierKernel(64, num_dims=3, kernel="gaussian")
    with pytest.raises(ValueError, match="'qmc'"):
        RandomFourierKernel(64, num_dims=3, sampler="sobol")
    with pytest.raises(ValueError, match="num_dims"):
        RandomFourierKernel(64)
    with pytest.raises(ValueError, match="ard_num_dims"):
        RandomFourierKernel(64, num_dims=3, ard_num_dims=2)
    kernel = _kernel64()
    with pytest.raises(ValueError, match="num_dims=4"):
        kernel(torch.randn(5, 4, dtype=torch.float64)).to_dense()
    bad = x64.clone()
    bad[3, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        kernel(bad).to_dense()
    with pytest.raises(ValueError, match="lengthscale must be positive"):
        kernel.lengthscale = -1.0
    with pytest.raises(ValueError, match="lengthscale must be positive"):
        kernel.initialize(lengthscale=0.0)
    with pytest.raises(TypeError, match="Products of random-feature kernels"):
        kernel * _kernel64()


def test_share_features_uses_one_draw_for_every_batch_member():
    kernel = RandomFourierKernel(16, num_dims=2, batch_shape=torch.Size([3]), seed=0).double()
    kernel.lengthscale = torch.tensor([0.5, 0.5, 2.0], dtype=torch.float64).view(3, 1, 1)
    first_member_draws = kernel.feature_map.frequencies[0].clone()
    assert kernel.share_features() is kernel
    assert kernel.feature_map.batch_shape == torch.Size()
    torch.testing.assert_close(kernel.feature_map.frequencies, first_member_draws)
    x = torch.rand(5, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    covariance = kernel(x).to_dense()
    assert covariance.shape == (3, 5, 5)
    torch.testing.assert_close(covariance[0], covariance[1], rtol=0, atol=0)  # same lengthscale, same features
    assert not torch.allclose(covariance[0], covariance[2])
    fresh = RandomFourierKernel(16, num_dims=2, batch_shape=torch.Size([3]), seed=1).double().share_features()
    fresh.load_state_dict(kernel.state_dict())
    torch.testing.assert_close(fresh(x).to_dense(), covariance, rtol=0, atol=0)
    kernel.resample_features(torch.Generator().manual_seed(2))
    assert kernel.feature_map.frequencies.shape == first_member_draws.shape


def test_feature_sum_respects_each_summands_active_dims():
    from gpytorch.kernels import ScaleKernel

    first = RandomFourierKernel(16, num_dims=1, active_dims=[0], seed=0).double()
    second = ScaleKernel(RandomFourierKernel(16, num_dims=2, active_dims=[1, 2], seed=1)).double()
    total = first + second
    x = torch.rand(6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    expected = first(x).to_dense() + second(x).to_dense()
    torch.testing.assert_close(total(x).to_dense(), expected, rtol=0, atol=1e-12)
