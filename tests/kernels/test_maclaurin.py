"""MaclaurinKernel: GPyTorch kernel contract, optimized allocations on X / lengthscale, the exact targets,
GP training with allocation refits, load_state_dict into fresh models, and BoTorch's SingleTaskGP."""

from __future__ import annotations

import unittest

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from linear_operator.operators import LowRankRootLinearOperator

from gprf.features import MaclaurinFeatures, optimize_maclaurin_allocation
from gprf.kernels import ExponentialDotProductKernel, MaclaurinKernel, ScaledPolynomialKernel
from gprf.metrics import relative_frobenius_error
from gprf.prediction import FeatureSpacePredictionStrategy
from gprf.testing import SEED, ExactGPModel, FeatureKernelTestCase, num_dims_of

# Small matrices: a second OpenMP thread on a shared two-core machine makes them 10x slower.
pytestmark = pytest.mark.usefixtures("single_thread")

# Explicit allocations: two kernels built with the same seed draw the same sketches (an optimized
# allocation would depend on the data it was fitted on).
GAUSSIAN_ALLOCATION = [31, 20, 12]
EXPONENTIAL_ALLOCATION = [20, 12]


class TestGaussianMaclaurinKernel(FeatureKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return MaclaurinKernel(
            64,
            num_dims_of(kwargs, 2),
            kernel="gaussian",
            sketch="srht",
            allocation=GAUSSIAN_ALLOCATION,
            seed=SEED,
            **kwargs,
        )

    def create_kernel_ard(self, num_dims, **kwargs):
        return MaclaurinKernel(
            64,
            num_dims,
            kernel="gaussian",
            sketch="srht",
            allocation=GAUSSIAN_ALLOCATION,
            ard_num_dims=num_dims,
            seed=SEED,
            **kwargs,
        )


class TestExponentialMaclaurinKernel(FeatureKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return MaclaurinKernel(
            33,
            num_dims_of(kwargs, 2),
            kernel="exponential",
            complex=True,
            allocation=EXPONENTIAL_ALLOCATION,
            seed=SEED,
            **kwargs,
        )

    def create_kernel_ard(self, num_dims, **kwargs):
        return MaclaurinKernel(
            33,
            num_dims,
            kernel="exponential",
            complex=True,
            allocation=EXPONENTIAL_ALLOCATION,
            ard_num_dims=num_dims,
            seed=SEED,
            **kwargs,
        )


def _x(n=60, d=3, seed=0, scale=2.0):
    return scale * torch.rand(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# ---------------------------------------------------------------------------------------- allocation
def test_train_inputs_optimize_on_scaled_inputs(float64):
    x = _x()
    kernel = MaclaurinKernel(128, num_dims=3, kernel="gaussian", sketch="srht", ard_num_dims=3, train_inputs=x, seed=0)
    scaled = x / kernel.lengthscale
    reference = MaclaurinFeatures(3, 128, kernel="gaussian", sketch="srht", seed=0)
    result = reference.fit_allocation(scaled)
    assert kernel.feature_map.counts == result.counts
    torch.testing.assert_close(kernel.feature_map.center, scaled.mean(0))
    # The same seed, the same allocation and the same centre: the same features.
    torch.testing.assert_close(kernel.features(x), reference(scaled))
    # The function on the centred sample gives the same allocation.
    assert (
        optimize_maclaurin_allocation(scaled - scaled.mean(0), 128, kernel="gaussian", sketch="srht").counts
        == result.counts
    )


def test_refit_after_lengthscale_change_follows_the_function(float64):
    x = _x()
    kernel = MaclaurinKernel(128, num_dims=3, kernel="gaussian", sketch="rademacher", train_inputs=x, seed=0)
    before = kernel.feature_map.counts
    kernel.lengthscale = 3.0
    result = kernel.refit_allocation(x)
    scaled = x / 3.0
    expected = optimize_maclaurin_allocation(scaled - scaled.mean(0), 128, kernel="gaussian", sketch="rademacher")
    assert result.counts == expected.counts == kernel.feature_map.counts
    assert abs(result.variance - expected.variance) < 1e-12 * expected.variance
    torch.testing.assert_close(kernel.feature_map.center, scaled.mean(0))
    # Larger lengthscale, smaller scaled inputs: fewer degrees are needed.
    assert kernel.feature_map.counts != before and len(kernel.feature_map.counts) < len(before), (before, result.counts)


def test_refit_with_active_dims_and_batch(float64):
    x = _x(d=4)
    kernel = MaclaurinKernel(64, kernel="gaussian", active_dims=[0, 2], train_inputs=x, seed=0)
    assert kernel.feature_map.input_dim == 2
    scaled = x[:, [0, 2]] / kernel.lengthscale
    expected = optimize_maclaurin_allocation(scaled - scaled.mean(0), 64, kernel="gaussian")
    assert kernel.feature_map.counts == expected.counts
    # Batched kernels (one member per output) share one allocation fitted on every member's scaled points.
    batched = MaclaurinKernel(64, num_dims=4, kernel="gaussian", batch_shape=torch.Size([2]), seed=0)
    batched.lengthscale = torch.tensor([[[1.0]], [[2.0]]])
    batched.refit_allocation(x)
    pooled = torch.cat([x / 1.0, x / 2.0])
    assert (
        batched.feature_map.counts
        == optimize_maclaurin_allocation(pooled - pooled.mean(0), 64, kernel="gaussian").counts
    )
    assert batched(x).to_dense().shape == (2, 60, 60)


def test_refit_is_rejected_for_random_allocations():
    kernel = MaclaurinKernel(32, num_dims=2, allocation="random", seed=0)
    with pytest.raises(ValueError, match="allocation='optimized'"):
        kernel.refit_allocation(torch.rand(10, 2))


# ---------------------------------------------------------------------------------------- exact kernels
@pytest.mark.parametrize(
    ("name", "kwargs", "exact_type"),
    [
        ("gaussian", {}, RBFKernel),
        ("exponential", {}, ExponentialDotProductKernel),
        ("polynomial", {"degree": 3, "bias": 0.5}, ScaledPolynomialKernel),
    ],
)
def test_exact_kernel_is_tied(name, kwargs, exact_type, float64):
    x = _x(40, scale=0.6)
    kernel = MaclaurinKernel(2048, num_dims=3, kernel=name, sketch="srht", ard_num_dims=3, seed=0, **kwargs)
    kernel.lengthscale = torch.tensor([[1.5, 0.9, 2.0]])
    exact = kernel.exact()
    assert type(exact) is exact_type
    assert exact.raw_lengthscale is kernel.raw_lengthscale
    if name == "polynomial":
        assert exact.degree == 3 and exact.bias == 0.5
    z = x / kernel.lengthscale
    dot = z @ z.mT
    formula = {
        "gaussian": torch.exp(-0.5 * torch.cdist(z, z).square()),
        "exponential": dot.exp(),
        "polynomial": (dot + 0.5) ** 3,
    }[name]
    exact_matrix = exact(x).to_dense()
    torch.testing.assert_close(exact_matrix, formula)
    kernel.lengthscale = torch.tensor([[1.0, 1.2, 0.8]])
    torch.testing.assert_close(exact.lengthscale, kernel.lengthscale)
    # The approximation, optimized on the data, is close to the exact kernel.
    kernel.refit_allocation(x)
    error = relative_frobenius_error(kernel(x).to_dense(), exact(x).to_dense())
    assert error < 0.1, error


def test_evaluation_structure(float64):
    x = _x(30)
    kernel = MaclaurinKernel(40, num_dims=3, kernel="gaussian", complex=True, train_inputs=x, seed=0)
    covar = kernel(x).evaluate_kernel()
    assert isinstance(covar, LowRankRootLinearOperator) and covar.root.shape[-1] == 80 == kernel.root_dim
    phi = kernel.feature_map(x / kernel.lengthscale)
    torch.testing.assert_close(covar.to_dense(), (phi @ phi.conj().mT).real)
    torch.testing.assert_close(kernel(x, diag=True), phi.abs().square().sum(-1))


# ---------------------------------------------------------------------------------------- GP level
def _regression_data(n=120, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, generator=generator, dtype=torch.float64)
    f = torch.sin(3 * x[:, 0]) + torch.cos(2 * x[:, 1])
    return x, f + 0.05 * torch.randn(n, generator=generator, dtype=torch.float64)


def _gaussian_model(x, y, **kwargs):
    covar = ScaleKernel(MaclaurinKernel(128, num_dims=2, kernel="gaussian", sketch="srht", **kwargs))
    return ExactGPModel(x, y, gpytorch.likelihoods.GaussianLikelihood(), covar).double()


def test_gp_training_with_refits_and_load_state_dict(float64):
    x, y = _regression_data()
    model = _gaussian_model(x, y, train_inputs=x, seed=0)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    model.train()
    losses = []
    for step in range(60):
        if step > 0 and step % 20 == 0:
            model.covar_module.base_kernel.refit_allocation(x)
        optimizer.zero_grad()
        loss = -mll(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.covar_module.base_kernel.refit_allocation(x)
    assert losses[-1] < losses[0] - 0.5, losses[::10]
    model.eval()
    test_x = torch.rand(50, 2, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    test_f = torch.sin(3 * test_x[:, 0]) + torch.cos(2 * test_x[:, 1])
    with torch.no_grad():
        posterior = model(test_x)
    assert isinstance(model.prediction_strategy, FeatureSpacePredictionStrategy)
    assert (posterior.mean - test_f).square().mean().sqrt() < 0.1, (posterior.mean - test_f).abs().max()
    assert (posterior.variance > 0).all()

    # A freshly built model (default allocation, another seed) reproduces the predictions exactly.
    fresh = _gaussian_model(x, y, seed=123)
    assert fresh.covar_module.base_kernel.feature_map.counts != model.covar_module.base_kernel.feature_map.counts
    fresh.load_state_dict(model.state_dict())
    fresh.eval()
    assert fresh.covar_module.base_kernel.feature_map.counts == model.covar_module.base_kernel.feature_map.counts
    with torch.no_grad():
        fresh_posterior = fresh(test_x)
    torch.testing.assert_close(fresh_posterior.mean, posterior.mean, rtol=0, atol=1e-12)
    torch.testing.assert_close(fresh_posterior.variance, posterior.variance, rtol=0, atol=1e-12)


def test_botorch_single_task_gp(float64):
    botorch = pytest.importorskip("botorch")
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP

    x, y = _regression_data(60, seed=1)
    train_y = y.unsqueeze(-1)

    def build(**kwargs):
        covar = ScaleKernel(MaclaurinKernel(64, num_dims=2, kernel="gaussian", sketch="srht", ard_num_dims=2, **kwargs))
        return SingleTaskGP(x, train_y, covar_module=covar)

    model = build(train_inputs=x, seed=0)
    fit_gpytorch_mll(
        gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model), optimizer_kwargs={"options": {"maxiter": 20}}
    )
    model.covar_module.base_kernel.refit_allocation(x)
    test_x = torch.rand(7, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    posterior = model.posterior(test_x)
    assert posterior.mean.shape == (7, 1)
    assert (posterior.variance > 0).all()
    assert type(model.prediction_strategy) is FeatureSpacePredictionStrategy

    fresh = build(seed=5)
    fresh.load_state_dict(model.state_dict())
    fresh_posterior = fresh.posterior(test_x)
    torch.testing.assert_close(fresh_posterior.mean, posterior.mean, rtol=0, atol=1e-10)
    torch.testing.assert_close(fresh_posterior.variance, posterior.variance, rtol=0, atol=1e-10)
    assert botorch is not None


# ---------------------------------------------------------------------------------------- bad input
def test_bad_input():
    with pytest.raises(ValueError, match="num_dims"):
        MaclaurinKernel(32)
    with pytest.raises(ValueError, match="'exponential', 'polynomial', 'gaussian'"):
        MaclaurinKernel(32, num_dims=2, kernel="rbf")
    with pytest.raises(ValueError, match="'rademacher', 'gaussian', 'srht'"):
        MaclaurinKernel(32, num_dims=2, sketch="tensorsketch")
    with pytest.raises(ValueError, match="needs degree"):
        MaclaurinKernel(32, num_dims=2, kernel="polynomial")
    with pytest.raises(ValueError, match="only apply to kernel='polynomial'"):
        MaclaurinKernel(32, num_dims=2, kernel="gaussian", bias=1.0)
    with pytest.raises(ValueError, match="num_features - 1 = 31"):
        MaclaurinKernel(32, num_dims=2, allocation=[16, 16])
    with pytest.raises(ValueError, match="max_degree=None"):
        MaclaurinKernel(32, num_dims=2, max_degree=None)
    with pytest.raises(ValueError, match="'real_kernel', 'complex'"):
        MaclaurinKernel(32, num_dims=2, posterior="exact")
    kernel = MaclaurinKernel(32, num_dims=2, seed=0)
    with pytest.raises(ValueError, match="num_dims=3"):
        kernel(torch.rand(5, 3)).to_dense()
