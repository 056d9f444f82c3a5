"""Pathwise posterior sampling of gprf models through BoTorch (prior features, weight-space update)."""

from __future__ import annotations

import math
from unittest import mock

import pytest
import torch
from botorch.acquisition.thompson_sampling import PathwiseThompsonSampling
from botorch.models import SingleTaskGP
from botorch.optim import optimize_acqf
from botorch.sampling.pathwise import draw_matheron_paths, update_strategies
from botorch.sampling.pathwise.features import gen_kernel_features
from gpytorch.kernels import ScaleKernel
from linear_operator.operators import ZeroLinearOperator

import gprf.botorch.dispatch as gprf_dispatch
from gprf.botorch import KernelRootFeatureMap, path_weights, weight_space_update
from gprf.exceptions import NonFiniteTrainingDataError
from gprf.botorch.dispatch import botorch_gaussian_update
from gprf.kernels import RandomFourierKernel
from tests.botorch.conftest import make_botorch_model

pytestmark = pytest.mark.botorch

NUM_PATHS = 20_000
Z_BOUND = 5.0


def _evaluate(paths, model, x):
    """Path values ``S x M x m`` (BoTorch puts the outputs of batched models in a batch dimension)."""
    if model.num_outputs == 1:
        return paths(x).unsqueeze(-1)
    return paths(x.unsqueeze(-3)).transpose(-1, -2)


@pytest.mark.parametrize("num_outputs", [1, 2])
def test_matheron_paths_reproduce_the_posterior(num_outputs, device):
    model = make_botorch_model(num_outputs=num_outputs, n=30, num_features=32, device=device)
    model.eval()
    test_x = (2 * torch.rand(4, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64) - 1).to(device)
    posterior = model.posterior(test_x)
    mean, covariance = posterior.mean, posterior.mvn.covariance_matrix.detach()
    torch.manual_seed(0)
    with torch.no_grad():
        samples = _evaluate(draw_matheron_paths(model, torch.Size([NUM_PATHS])), model, test_x)  # S x M x m

    variance = posterior.variance.detach()
    z_mean = (samples.mean(0) - mean.detach()) / (variance / NUM_PATHS).sqrt()
    assert z_mean.abs().max() < Z_BOUND
    # Sample variance of Gaussian values: standard error sigma^2 sqrt(2 / (S - 1)).
    z_variance = (samples.var(0) - variance) / (variance * math.sqrt(2 / (NUM_PATHS - 1)))
    assert z_variance.abs().max() < Z_BOUND
    # Cross-covariances between test points (first output): se sqrt((s_ii s_jj + s_ij^2) / S).
    first = samples[..., 0] - samples[..., 0].mean(0)
    sample_covariance = first.mT @ first / (NUM_PATHS - 1)
    exact = covariance if num_outputs == 1 else covariance[: test_x.size(0), : test_x.size(0)]
    diag = exact.diagonal()
    standard_error = ((diag.unsqueeze(-1) * diag + exact.square()) / NUM_PATHS).sqrt()
    assert ((sample_covariance - exact) / standard_error).abs().max() < Z_BOUND


@pytest.mark.parametrize("num_outputs", [1, 2])
@pytest.mark.parametrize("fixed_noise", [False, True])
def test_weight_space_update_equals_the_dense_update(num_outputs, fixed_noise):
    kwargs = {"train_Yvar": torch.rand(40, num_outputs, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 0.05} if fixed_noise else {}
    model = make_botorch_model(num_outputs=num_outputs, **kwargs)
    model.eval()
    (train_x,) = model.train_inputs
    sample_values = torch.randn(5, *model.train_targets.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    test_x = model.transform_inputs(torch.rand(7, 3, dtype=torch.float64))
    if num_outputs > 1:
        test_x = test_x.unsqueeze(-3)
    with torch.random.fork_rng():
        torch.manual_seed(4)
        ours = weight_space_update(model, model.likelihood, sample_values=sample_values)
    with torch.random.fork_rng():
        torch.manual_seed(4)  # the same observation-noise draws
        dense = botorch_gaussian_update(model, model.likelihood, sample_values=sample_values)
    torch.testing.assert_close(ours(test_x), dense(test_x), rtol=0, atol=1e-9)


def test_gprf_models_dispatch_to_the_weight_space_update():
    model = make_botorch_model()
    model.eval()
    with mock.patch.object(gprf_dispatch, "weight_space_update", wraps=gprf_dispatch.weight_space_update) as spy:
        draw_matheron_paths(model, torch.Size([3]))
    assert spy.call_count == 1


def test_other_models_keep_botorch_update():
    x = torch.rand(20, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    model = SingleTaskGP(x, torch.sin(4 * x).sum(-1, keepdim=True))
    model.eval()
    with (
        mock.patch.object(gprf_dispatch, "weight_space_update") as ours,
        mock.patch.object(gprf_dispatch, "botorch_gaussian_update", wraps=gprf_dispatch.botorch_gaussian_update) as theirs,
    ):
        paths = draw_matheron_paths(model, torch.Size([3]))
    assert ours.call_count == 0 and theirs.call_count == 1
    assert paths(x[:4]).shape == (3, 4)


def test_plain_single_task_gp_with_gprf_kernel_samples_paths():
    x = torch.rand(25, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    kernel = ScaleKernel(RandomFourierKernel(32, num_dims=2, ard_num_dims=2, seed=0))
    model = SingleTaskGP(x, torch.sin(4 * x).sum(-1, keepdim=True), covar_module=kernel)
    model.eval()
    acquisition = PathwiseThompsonSampling(model)
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    candidates, _ = optimize_acqf(acquisition, bounds, q=3, num_restarts=2, raw_samples=16, options={"maxiter": 5})
    assert candidates.shape == (3, 2) and ((candidates >= 0) & (candidates <= 1)).all()


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


def test_path_weights_are_unbiased_per_output():
    torch.manual_seed(0)
    weights = path_weights(torch.Size([NUM_PATHS, 2, 8]), batch_ndim=1)
    assert weights.shape == (NUM_PATHS, 2, 8)
    z = weights.mean(0) / math.sqrt(1 / NUM_PATHS)
    assert z.abs().max() < Z_BOUND
    z_variance = (weights.var(0) - 1) / math.sqrt(2 / (NUM_PATHS - 1))
    assert z_variance.abs().max() < Z_BOUND


def test_noise_free_update_is_refused():
    model = make_botorch_model()
    model.eval()
    sample_values = torch.zeros(2, 40, dtype=torch.float64)
    with pytest.raises(ValueError, match="positive observation noise"):
        weight_space_update(model, model.likelihood, sample_values=sample_values, noise_covariance=ZeroLinearOperator(40, 40, dtype=torch.float64))


def test_non_finite_targets_are_refused_by_the_update():
    model = make_botorch_model()
    model.eval()
    targets = model.train_targets.clone()
    targets[..., [0, 5]] = float("nan")
    sample_values = torch.zeros(2, 40, dtype=torch.float64)
    with pytest.raises(NonFiniteTrainingDataError, match="^2 of 40 training points"):
        weight_space_update(model, model.likelihood, sample_values=sample_values, target_values=targets)
