"""FeatureProductKernel: GPyTorch's BaseKernelTestCase for each product method, Monte-Carlo means equal to the exact
product kernel and variances equal to the closed forms, the tied exact ProductKernel, ``*`` between feature kernels,
serialisation, devices, a GP-level test against the exact-kernel GP, and construction errors."""

from __future__ import annotations

import math
import pickle
import unittest

import gpytorch
import pytest
import torch
from gpytorch.kernels import MaternKernel, ProductKernel, RBFKernel, ScaleKernel

import gprf
from gprf.kernels import FeatureProductKernel, PolynomialSketchKernel, RandomFourierKernel
from gprf.testing import SEED, ExactGPModel, FeatureKernelTestCase, num_dims_of, train_by_mll

Z_BOUND = 4.5  # two-sided, over a few dozen z-scores per test
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")),
]


def _factors(num_dims: int, num_features: int = 16, ard: bool = False, batch_shape=torch.Size(), seed: int = SEED):
    ard_kwargs = {"ard_num_dims": num_dims} if ard else {}
    first = RandomFourierKernel(num_features, num_dims, batch_shape=batch_shape, seed=seed, **ard_kwargs)
    second = RandomFourierKernel(
        num_features, num_dims, kernel="matern52", batch_shape=batch_shape, seed=seed + 1, **ard_kwargs
    )
    return first, second


class TestKroneckerProductKernel(FeatureKernelTestCase, unittest.TestCase):
    method, num_features = "kronecker", None

    def create_kernel_no_ard(self, **kwargs):
        num_dims = num_dims_of(kwargs, 2)
        batch_shape = kwargs.pop("batch_shape", torch.Size())
        factors = _factors(num_dims, batch_shape=batch_shape)
        return FeatureProductKernel(*factors, num_features=self.num_features, method=self.method, seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        batch_shape = kwargs.pop("batch_shape", torch.Size())
        factors = _factors(num_dims, ard=True, batch_shape=batch_shape)
        return FeatureProductKernel(*factors, num_features=self.num_features, method=self.method, seed=SEED, **kwargs)


class TestJointProductKernel(TestKroneckerProductKernel):
    method, num_features = "joint", 16


class TestPermutationProductKernel(TestKroneckerProductKernel):
    method, num_features = "permutation", 16


# ---------------------------------------------------------------------- Monte Carlo against the closed forms
def _disjoint_product(method: str, num_features: int = 8, outputscale: float = 1.5) -> FeatureProductKernel:
    """RBF on columns 0:2 times ScaleKernel(Matérn-5/2) on columns 2:4, non-default lengthscales."""
    rbf = RandomFourierKernel(num_features, num_dims=2, ard_num_dims=2, active_dims=[0, 1], seed=0)
    rbf.lengthscale = torch.tensor([0.7, 1.3])
    matern = ScaleKernel(RandomFourierKernel(num_features, num_dims=2, kernel="matern52", active_dims=[2, 3], seed=1))
    matern.outputscale = outputscale
    matern.base_kernel.lengthscale = 0.9
    sketched = None if method == "kronecker" else num_features
    return FeatureProductKernel(rbf, matern, num_features=sketched, method=method, seed=2).double()


def _pairs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    x1 = 0.6 * torch.randn(4, 4, generator=generator, dtype=torch.float64)
    x2 = x1 + 0.5 * torch.randn(4, 4, generator=generator, dtype=torch.float64)
    return x1, x2


def _self_product(method: str, num_features: int = 8) -> FeatureProductKernel:
    """An RBF kernel on all four columns times itself (one kernel object, so one draw unless the product redraws)."""
    rbf = RandomFourierKernel(num_features, num_dims=4, ard_num_dims=4, seed=0)
    rbf.lengthscale = torch.tensor([0.7, 1.3, 0.9, 1.1])
    sketched = None if method == "kronecker" else num_features
    return FeatureProductKernel(rbf, rbf, num_features=sketched, method=method, seed=2).double()


@pytest.mark.parametrize("build", [_disjoint_product, _self_product])
@pytest.mark.parametrize("method", ["kronecker", "joint", "permutation"])
def test_monte_carlo_mean_is_the_exact_product_and_variance_the_closed_form(method, build):
    kernel, (x1, x2) = build(method), _pairs()
    num_draws = 1500
    generator = torch.Generator().manual_seed(7)
    with torch.no_grad():
        exact = kernel.exact()(x1, x2, diag=True)
        variance = kernel.variance(x1, x2)
        draws = []
        for _ in range(num_draws):
            kernel.resample_features(generator)
            draws.append(kernel(x1, x2, diag=True))
    draws = torch.stack(draws)
    # Unbiased: the mean of the draws is within Z_BOUND standard errors (closed-form variance) of the exact product.
    z_mean = (draws.mean(0) - exact) / (variance / num_draws).sqrt()
    assert z_mean.abs().max() < Z_BOUND
    # The sample variance has standard error sigma^2 sqrt((kappa - 1) / S), kappa the draws' own kurtosis.
    centred = draws - draws.mean(0)
    kurtosis = centred.pow(4).mean(0) / centred.pow(2).mean(0).square()
    z_variance = (draws.var(0) - variance) / (variance * ((kurtosis - 1) / num_draws).sqrt())
    assert z_variance.abs().max() < Z_BOUND


def test_joint_frequencies_are_exact_on_the_diagonal_and_beat_the_permutation_per_feature():
    x1, x2 = _pairs()
    joint, permutation = _disjoint_product("joint"), _disjoint_product("permutation")
    with torch.no_grad():
        # The joint product is random Fourier features of the product: cos(0) = 1 on the diagonal, no variance.
        torch.testing.assert_close(joint(x1, diag=True), torch.full((4,), 1.5, dtype=torch.float64))
        assert bool((joint.variance(x1, x1) == 0).all())
        assert bool((joint.variance(x1, x2) < permutation.variance(x1, x2)).all())


def test_kronecker_of_an_exact_factor_has_the_factors_variance():
    """With a deterministic second factor (a scaled feature sum is not; a task factor is), the Kronecker variance
    reduces to s^2 v_1; checked here against the closed form of the first factor directly."""
    kernel, (x1, x2) = _disjoint_product("kronecker"), _pairs()
    with torch.no_grad():
        rbf, matern = kernel.kernels
        z1, z2 = x1[:, :2] / rbf.lengthscale, x2[:, :2] / rbf.lengthscale
        m1, m2 = x1[:, 2:] / matern.base_kernel.lengthscale, x2[:, 2:] / matern.base_kernel.lengthscale
        k1, v1 = rbf.feature_map.expected_kernel(z1, z2), rbf.feature_map.variance(z1, z2)
        k2 = 1.5 * matern.base_kernel.feature_map.expected_kernel(m1, m2)
        v2 = 1.5**2 * matern.base_kernel.feature_map.variance(m1, m2)
        expected = (v1 + k1.square()) * (v2 + k2.square()) - (k1 * k2).square()
        torch.testing.assert_close(kernel.variance(x1, x2), expected)


def _times_itself(how: str, kernel: RandomFourierKernel):
    if how == "k * k":
        return kernel * kernel
    if how == "same seed":
        twin = RandomFourierKernel(kernel.num_features, num_dims=2, seed=kernel.feature_map.seed).double()
        twin.raw_lengthscale = kernel.raw_lengthscale
        return kernel * twin
    if how == "FeatureProductKernel(k, k)":
        return FeatureProductKernel(kernel, kernel, num_features=kernel.root_dim)
    return gprf.random_features(ProductKernel(kernel, kernel), kernel.root_dim)


@pytest.mark.parametrize("how", ["k * k", "same seed", "FeatureProductKernel(k, k)", "random_features"])
def test_a_kernel_times_itself_estimates_its_square(how):
    """A repeated factor gets its own draws: the estimate of k(x, y)^2 is within Z_BOUND closed-form standard
    deviations everywhere (one shared draw estimates k(2(x - y)) instead, dozens of standard deviations off)."""
    kernel = RandomFourierKernel(4096, num_dims=2, seed=0).double()
    kernel.lengthscale = 0.8
    product = _times_itself(how, kernel)
    assert isinstance(product, FeatureProductKernel) and product.method == "joint"
    first, second = product.kernels
    assert first.raw_lengthscale is second.raw_lengthscale  # one hyperparameter, two draws
    assert not torch.equal(first.feature_map.frequencies, second.feature_map.frequencies)
    generator = torch.Generator().manual_seed(0)
    x1 = 0.7 * torch.randn(64, 2, generator=generator, dtype=torch.float64)
    x2 = x1 + 0.5 * torch.randn(64, 2, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        square = kernel.exact()(x1, x2, diag=True).square()
        z = (product(x1, x2, diag=True) - square) / product.variance(x1, x2).sqrt()
    assert z.abs().max() < Z_BOUND


def test_a_repeated_factor_keeps_its_own_draws_reproducibly():
    kernel = RandomFourierKernel(16, num_dims=2, seed=0).double()
    product, again = kernel * kernel, kernel * kernel
    copy = product.kernels[1]
    assert product.kernels[0] is kernel and copy is not kernel
    assert copy.feature_map.seed not in (None, 0)
    # Seeded: the same copy every time, and resample_features() without a generator redraws each factor's own draw.
    torch.testing.assert_close(copy.feature_map.frequencies, again.kernels[1].feature_map.frequencies, rtol=0, atol=0)
    before = copy.feature_map.frequencies.clone()
    product.resample_features()
    torch.testing.assert_close(copy.feature_map.frequencies, before, rtol=0, atol=0)
    assert not torch.equal(kernel.feature_map.frequencies, copy.feature_map.frequencies)
    # Products of products: no factor repeats another's seed, however deep.
    triple = (kernel * kernel) * kernel
    seeds = [factor.feature_map.seed for factor in (*triple.kernels[0].kernels, triple.kernels[1])]
    assert len(set(seeds)) == 3
    # Training the product trains the one lengthscale.
    kernel.lengthscale = 0.5
    torch.testing.assert_close(copy.lengthscale, torch.tensor([[0.5]], dtype=torch.float64))


# ---------------------------------------------------------------------- structure, tying, serialisation
def test_exact_is_gpytorchs_product_of_tied_exact_factors():
    kernel = _disjoint_product("joint")
    exact = kernel.exact()
    assert isinstance(exact, ProductKernel)
    rbf, scaled = exact.kernels
    assert isinstance(rbf, RBFKernel) and isinstance(scaled, ScaleKernel)
    assert isinstance(scaled.base_kernel, MaternKernel) and scaled.base_kernel.nu == 2.5
    assert rbf.raw_lengthscale is kernel.kernels[0].raw_lengthscale
    assert scaled.raw_outputscale is kernel.kernels[1].raw_outputscale
    x = torch.randn(6, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with torch.no_grad():
        kernel.kernels[1].outputscale = 0.4
        expected = RBFKernel(ard_num_dims=2).double()
        expected.lengthscale = kernel.kernels[0].lengthscale
        matern = MaternKernel(nu=2.5).double()
        matern.lengthscale = kernel.kernels[1].base_kernel.lengthscale
        reference = expected(x[:, :2]).to_dense() * 0.4 * matern(x[:, 2:]).to_dense()
        torch.testing.assert_close(exact(x).to_dense(), reference)


def test_multiplication_operator_builds_the_product():
    first, second = _factors(3, num_features=32)
    joint = first * second
    assert isinstance(joint, FeatureProductKernel) and joint.method == "joint" and joint.root_dim == 32
    small = RandomFourierKernel(4, num_dims=3, seed=0) * RandomFourierKernel(4, num_dims=3, seed=1)
    assert small.method == "joint"  # 16 Kronecker columns exceed the 4-column budget of `*`
    sketch = PolynomialSketchKernel(32, num_dims=3, degree=2, seed=0)
    mixed = first * sketch
    assert mixed.method == "permutation" and mixed.root_dim == 32
    with pytest.raises(TypeError, match="Multiplying a random-feature kernel by RBFKernel.*FeatureProductKernel"):
        first * RBFKernel()


def test_pairing_is_a_buffer_that_travels():
    kernel = _disjoint_product("permutation")
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    assert "pairing" in dict(kernel.named_buffers()) and kernel.pairing.shape == (2, 8)
    fresh = FeatureProductKernel(
        *(_disjoint_product("permutation").kernels), num_features=8, method="permutation", seed=99
    ).double()
    fresh.load_state_dict(kernel.state_dict())
    torch.testing.assert_close(fresh(x).to_dense(), kernel(x).to_dense(), rtol=0, atol=0)
    clone = pickle.loads(pickle.dumps(kernel))
    torch.testing.assert_close(clone(x).to_dense(), kernel(x).to_dense(), rtol=0, atol=0)
    before = kernel.pairing.clone()
    kernel.resample_features(torch.Generator().manual_seed(3))
    assert not torch.equal(kernel.pairing, before)


def test_batch_indexing_and_expansion_keep_the_pairing():
    factors = _factors(3, batch_shape=torch.Size([2]))
    kernel = FeatureProductKernel(*factors, num_features=16, method="permutation", seed=0).double()
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    covariance = kernel(x).to_dense()
    assert kernel.batch_shape == (2,) and covariance.shape == (2, 6, 6)
    torch.testing.assert_close(kernel[1](x).to_dense(), covariance[1], rtol=1e-12, atol=1e-12)
    plain = FeatureProductKernel(*_factors(3), num_features=16, method="permutation", seed=0).double()
    torch.testing.assert_close(plain.expand_batch(torch.Size([3]))(x).to_dense(), plain(x).to_dense().expand(3, 6, 6))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_devices_and_dtypes(device, dtype):
    kernel = _disjoint_product("permutation").to(device=device, dtype=dtype)
    assert kernel.dtype == dtype and kernel.device.type == device and kernel.pairing.device.type == device
    x = torch.randn(5, 4, generator=torch.Generator().manual_seed(0), dtype=dtype).to(device)
    covariance = kernel(x).to_dense()
    assert covariance.dtype == dtype and covariance.device.type == device
    reference = _disjoint_product("permutation")(x.double().cpu()).to_dense()
    atol = 1e-5 * float(reference.detach().abs().max()) if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(covariance.double().cpu(), reference, rtol=0, atol=atol)


# ---------------------------------------------------------------------- GP level
def test_training_reduces_the_loss_and_predictions_match_the_exact_product_gp():
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(60, 4, generator=generator, dtype=torch.float64)
    y = torch.sin(3 * x[:, 0]) * torch.cos(2 * x[:, 2]) + 0.05 * torch.randn(
        60, generator=generator, dtype=torch.float64
    )
    test_x = torch.rand(10, 4, generator=generator, dtype=torch.float64)
    kernel = ScaleKernel(_disjoint_product("joint", num_features=1024, outputscale=1.0)).double()
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    model = ExactGPModel(x, y, likelihood, kernel).double()
    losses = train_by_mll(model, x, y, steps=10)
    assert losses[-1] < losses[0]
    exact = ExactGPModel(x, y, likelihood, ScaleKernel(kernel.base_kernel.exact())).double()
    exact.covar_module.raw_outputscale = kernel.raw_outputscale
    exact.mean_module = model.mean_module
    model.eval(), exact.eval()
    with torch.no_grad():
        approximate, reference = model(test_x).mean, exact(test_x).mean
        # First-order perturbation of the predictive mean k*^T alpha: |delta| <= max|delta k| ||alpha||_1 (1 + ||k*^T
        # (K + s I)^{-1}||_inf), with max|delta k| bounded by Z_BOUND closed-form standard deviations of the map.
        train_covariance = exact.covar_module(x).to_dense() + likelihood.noise * torch.eye(60, dtype=torch.float64)
        alpha = torch.linalg.solve(train_covariance, y - model.mean_module.constant)
        weights = torch.linalg.solve(train_covariance, exact.covar_module(x, test_x).to_dense())
        left, right = torch.cat([x, test_x]).repeat_interleave(70, 0), torch.cat([x, test_x]).repeat(70, 1)
        sd = (kernel.outputscale**2 * kernel.base_kernel.variance(left, right)).max().sqrt()
        bound = Z_BOUND * sd * alpha.abs().sum() * (1 + weights.abs().sum(0).max())
    assert (approximate - reference).abs().max() < bound


# ---------------------------------------------------------------------- bad input
def test_bad_input_errors():
    first, second = _factors(3)
    with pytest.raises(ValueError, match="at least two kernels"):
        FeatureProductKernel(first)
    with pytest.raises(TypeError, match="only multiplies gprf feature kernels.*got RBFKernel"):
        FeatureProductKernel(first, RBFKernel())
    with pytest.raises(ValueError, match="num_features=1 must be .* at least the number of factors"):
        FeatureProductKernel(first, second, num_features=1, method="permutation")
    with pytest.raises(ValueError, match="batch_shapes .* do not broadcast"):
        batched = RandomFourierKernel(16, num_dims=3, batch_shape=torch.Size([3]), seed=0)
        FeatureProductKernel(RandomFourierKernel(16, num_dims=3, batch_shape=torch.Size([2])), batched)
    with pytest.raises(ValueError, match="method='kronecker' gives prod F_i = 256 columns > num_features=16"):
        FeatureProductKernel(first, second, num_features=16, method="kronecker")
    with pytest.raises(ValueError, match="at least num_features/2 = 16 frequencies"):
        FeatureProductKernel(first, second, num_features=32, method="joint")
    with pytest.raises(ValueError, match="random Fourier feature factors"):
        FeatureProductKernel(first, PolynomialSketchKernel(16, num_dims=3, degree=2), num_features=16, method="joint")
    with pytest.raises(ValueError, match="needs num_features"):
        FeatureProductKernel(first, second, method="permutation")
    with pytest.raises(ValueError, match="'kronecker'"):
        FeatureProductKernel(first, second, method="outer")
    with pytest.raises(NotImplementedError, match="F = F_1 = F_2"):
        FeatureProductKernel(first, second, num_features=8, method="permutation").variance(
            torch.zeros(2, 3), torch.zeros(2, 3)
        )
    assert math.isfinite(float(FeatureProductKernel(first, second).variance(torch.zeros(1, 3), torch.ones(1, 3))))
