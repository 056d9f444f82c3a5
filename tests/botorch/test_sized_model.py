"""``gprf.botorch.single_task_gp``: the exact SingleTaskGP while it is the cheaper model, random features beyond."""

from __future__ import annotations

import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize
from gpytorch.kernels import MaternKernel, RBFKernel
from gpytorch.mlls import ExactMarginalLogLikelihood
from hypothesis import given
from hypothesis import strategies as st

import gprf
from gprf.botorch import RandomFeatureSingleTaskGP, exact_is_cheaper, single_task_gp
from gprf.kernels import RandomFourierKernel
from tests.helpers.models import training_mll


def _data(n: int, d: int, m: int = 1, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(n, d, generator=generator, dtype=torch.float64)
    return x, torch.sin(3 * x).sum(-1, keepdim=True).expand(n, m) + 0.01 * torch.randn(n, m, generator=generator)


def test_the_crossover_is_where_the_cholesky_costs_what_the_features_route_costs():
    # N^3/3 <= N F^2 + F^3/3: with N = aF, a^3 <= 3a + 1, a <= 1.879...
    assert exact_is_cheaper(721, 384) and not exact_is_cheaper(722, 384)
    assert exact_is_cheaper(2405, 1280) and not exact_is_cheaper(2406, 1280)
    assert exact_is_cheaper(1, 1)


@given(num_points=st.integers(1, 5000), num_features=st.integers(1, 5000))
def test_exact_is_cheaper_once_cheaper_for_fewer_points_and_more_features(num_points, num_features):
    if exact_is_cheaper(num_points, num_features):
        assert exact_is_cheaper(max(1, num_points - 1), num_features)
        assert exact_is_cheaper(num_points, num_features + 1)
    assert exact_is_cheaper(num_points, num_features) == (
        num_points**3 <= 3 * num_points * num_features**2 + num_features**3
    )


@pytest.mark.parametrize("value", [0, -3, 2.5, True, "10"])
def test_bad_sizes_are_named(value):
    with pytest.raises(ValueError, match="num_points"):
        exact_is_cheaper(value, 10)
    with pytest.raises(ValueError, match="num_features"):
        exact_is_cheaper(10, value)


def test_every_closed_loop_size_of_the_benchmark_problems_stays_exact():
    """Up to 200 points in 2 to 20 dimensions the rule's F keeps the exact GP the cheaper model."""
    for d in (2, 6, 10, 20):
        for n in range(1, 201):
            assert exact_is_cheaper(n, gprf.suggest_num_features(n, d)), (n, d)


def test_small_data_get_botorchs_own_exact_model():
    x, y = _data(40, 6)
    model = single_task_gp(x, y)
    reference = SingleTaskGP(x, y)
    assert type(model) is SingleTaskGP and isinstance(model.covar_module, RBFKernel)
    assert model.state_dict().keys() == reference.state_dict().keys()
    for key, value in reference.state_dict().items():
        torch.testing.assert_close(model.state_dict()[key], value, rtol=0, atol=0)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    fit_gpytorch_mll(ExactMarginalLogLikelihood(reference.likelihood, reference))
    test = torch.rand(5, 6, dtype=torch.float64)
    torch.testing.assert_close(model.posterior(test).mean, reference.posterior(test).mean)


def test_large_data_get_the_random_feature_model_sized_by_the_rule():
    x, y = _data(800, 6)
    model = single_task_gp(x, y, kernel="matern52", seed=3)
    assert type(model) is RandomFeatureSingleTaskGP
    kernel = model.covar_module
    assert isinstance(kernel, RandomFourierKernel) and kernel.root_dim == gprf.suggest_num_features(800, 6) == 384
    reference = RandomFeatureSingleTaskGP(x, y, num_features=384, kernel="matern52", seed=3)
    torch.testing.assert_close(kernel(x[:7]).to_dense(), reference.covar_module(x[:7]).to_dense(), rtol=0, atol=0)


@pytest.mark.parametrize(("kernel", "nu"), [("matern12", 0.5), ("matern32", 1.5), ("matern52", 2.5)])
def test_matern_kernels_keep_botorchs_lengthscale_prior_and_the_output_batch(kernel, nu):
    x, y = _data(30, 4, m=2)
    model = single_task_gp(x, y, kernel=kernel)
    default = SingleTaskGP(x, y).covar_module
    covariance = model.covar_module
    assert type(model) is SingleTaskGP and isinstance(covariance, MaternKernel) and covariance.nu == nu
    assert covariance.batch_shape == torch.Size([2]) and covariance.ard_num_dims == 4
    torch.testing.assert_close(covariance.lengthscale, default.lengthscale)
    prior, reference = covariance.lengthscale_prior, default.lengthscale_prior
    assert type(prior) is type(reference) and torch.equal(prior.loc, reference.loc)
    assert torch.equal(prior.scale, reference.scale)


def test_the_rule_sees_the_transformed_inputs_and_observed_noise_passes_through():
    x, y = _data(40, 3)
    model = single_task_gp(x, y, torch.full_like(y, 1e-3), input_transform=Normalize(d=3))
    reference = SingleTaskGP(x, y, torch.full_like(y, 1e-3), input_transform=Normalize(d=3))
    assert type(model) is SingleTaskGP and isinstance(model.input_transform, Normalize)
    torch.testing.assert_close(model.likelihood.noise, reference.likelihood.noise, rtol=0, atol=0)
    big_x, big_y = _data(1300, 3)
    model = single_task_gp(big_x, big_y, torch.full_like(big_y, 1e-3), input_transform=Normalize(d=3))
    assert type(model) is RandomFeatureSingleTaskGP and model.covar_module.root_dim == 192  # 64 d, d = 3


def test_bad_arguments_are_named():
    x, y = _data(10, 2)
    with pytest.raises(ValueError, match="kernel must be one of"):
        single_task_gp(x, y, kernel="laplace")
    for name in ("covar_module", "num_features", "sampler"):
        with pytest.raises(TypeError, match=name):
            single_task_gp(x, y, **{name: None})
    with pytest.raises(ValueError, match=r"train_X must have shape"):
        single_task_gp(x[0], y)


@pytest.mark.parametrize("n", [10, 900], ids=["exact", "random-features"])
def test_inconsistent_and_empty_data_are_refused_on_either_branch(n):
    x, y = _data(n, 3)
    with pytest.raises(ValueError, match=rf"train_Y has {n - 1} rows .* train_X has {n}"):
        single_task_gp(x, y[:-1])
    with pytest.raises(ValueError, match=rf"train_Yvar has {n - 1} rows"):
        single_task_gp(x, y, torch.full_like(y, 1e-3)[:-1])
    with pytest.raises(ValueError, match="at least one point"):
        single_task_gp(x[:0], y[:0])


@pytest.mark.parametrize("n", [40, 800], ids=["exact", "random-features"])
def test_either_model_lives_on_the_datas_device_and_fits_there(n, device):
    x, y = (tensor.to(device) for tensor in _data(n, 6))
    model = single_task_gp(x, y, seed=0)
    assert type(model) is (SingleTaskGP if n == 40 else RandomFeatureSingleTaskGP)
    assert {parameter.device.type for parameter in model.parameters()} == {device.type}
    assert {buffer.device.type for buffer in model.buffers()} == {device.type}
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    before = training_mll(mll)
    fit_gpytorch_mll(mll)
    assert training_mll(mll) > before + 0.1  # BoTorch's start is far from the optimum of these smooth targets
    test = torch.rand(5, 6, dtype=torch.float64, device=device)
    posterior = model.posterior(test)
    assert posterior.mean.device.type == device.type and posterior.mean.shape == (5, 1)
    with torch.no_grad():
        fitted = model.posterior(x[:50]).mean  # measured 0.006 (exact) and 0.022 (features) of sd(y) = 0.7
    assert float((fitted - y[:50]).square().mean().sqrt()) < 0.05
