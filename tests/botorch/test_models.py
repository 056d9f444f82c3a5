"""RandomFeatureSingleTaskGP and plain SingleTaskGP with gprf kernels through BoTorch's model API."""

from __future__ import annotations

import pickle

import pytest
import torch
from botorch.acquisition import qKnowledgeGradient
from botorch.acquisition.logei import qLogNoisyExpectedImprovement
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms import Standardize
from botorch.optim import optimize_acqf
from botorch.sampling import SobolQMCNormalSampler
from gpytorch.kernels import RBFKernel, ScaleKernel
from gpytorch.mlls import ExactMarginalLogLikelihood

from gprf.botorch import RandomFeatureSingleTaskGP
from gprf.kernels import PolynomialSketchKernel, RandomFourierKernel
from gprf.prediction import FeatureSpacePredictionStrategy

from tests.botorch.conftest import make_botorch_model


pytestmark = pytest.mark.botorch

def _fit(model) -> None:
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model), optimizer_kwargs={"options": {"maxiter": 20}})


def _test_points(d: int = 3, m: int = 6, device="cpu") -> torch.Tensor:
    return (2 * torch.rand(m, d, generator=torch.Generator().manual_seed(11), dtype=torch.float64) - 1).to(device)


def test_default_kernel_follows_botorch_defaults():
    x = torch.rand(10, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = torch.stack([x.sum(-1), x.prod(-1)], -1)
    kernel = RandomFeatureSingleTaskGP(x, y, num_features=16, seed=0).covar_module
    assert isinstance(kernel, RandomFourierKernel)
    assert kernel.batch_shape == torch.Size([2]) and kernel.feature_map.batch_shape == torch.Size([2])
    assert kernel.lengthscale.shape == (2, 1, 3)
    exact_default = SingleTaskGP(x, y).covar_module
    assert type(kernel.lengthscale_prior) is type(exact_default.lengthscale_prior)
    torch.testing.assert_close(kernel.lengthscale_prior.loc, exact_default.lengthscale_prior.loc)
    assert kernel.raw_lengthscale_constraint.lower_bound == exact_default.raw_lengthscale_constraint.lower_bound


def test_transformed_input_dimension_sizes_the_kernel():
    from botorch.models.transforms.input import FilterFeatures

    x = torch.rand(10, 4, dtype=torch.float64)
    selected = FilterFeatures(feature_indices=torch.tensor([0, 2]))
    model = RandomFeatureSingleTaskGP(x, x.sum(-1, keepdim=True), num_features=16, input_transform=selected, seed=0)
    assert model.covar_module.feature_map.input_dim == 2 and model.covar_module.lengthscale.shape == (1, 2)
    model.eval()
    assert model.posterior(x[:3]).mean.shape == (3, 1)


@pytest.mark.parametrize("num_outputs", [1, 2])
def test_fit_posterior_and_acquisition(num_outputs, device):
    model = make_botorch_model(num_outputs=num_outputs, device=device)
    _fit(model)
    test_x = _test_points(device=device)
    posterior = model.posterior(test_x)
    assert posterior.mean.shape == (6, num_outputs) and (posterior.variance > 0).all()
    assert isinstance(model.prediction_strategy, FeatureSpacePredictionStrategy)

    bounds = torch.tensor([[-1.0] * 3, [1.0] * 3], dtype=torch.float64, device=device)
    objective = None
    if num_outputs > 1:
        from botorch.acquisition.objective import LinearMCObjective

        objective = LinearMCObjective(torch.tensor([1.0, -0.5], dtype=torch.float64, device=device))
    acquisition = qLogNoisyExpectedImprovement(
        model, X_baseline=model.train_inputs[0][..., 0, :, :] if num_outputs > 1 else model.train_inputs[0],
        sampler=SobolQMCNormalSampler(torch.Size([32]), seed=0), objective=objective, prune_baseline=False,
    )
    candidates, value = optimize_acqf(acquisition, bounds, q=2, num_restarts=2, raw_samples=32, options={"maxiter": 10})
    assert candidates.shape == (2, 3) and torch.isfinite(value)


def test_knowledge_gradient_uses_feature_space_fantasies():
    model = make_botorch_model()
    _fit(model)
    acquisition = qKnowledgeGradient(model, num_fantasies=4)
    bounds = torch.tensor([[-1.0] * 3, [1.0] * 3], dtype=torch.float64)
    candidates, value = optimize_acqf(acquisition, bounds, q=1, num_restarts=2, raw_samples=16, options={"maxiter": 5})
    assert candidates.shape == (1, 3) and torch.isfinite(value)
    fantasy = model.fantasize(candidates, sampler=SobolQMCNormalSampler(torch.Size([4]), seed=0))
    fantasy.posterior(_test_points())
    assert isinstance(fantasy.prediction_strategy, FeatureSpacePredictionStrategy)


@pytest.mark.parametrize("num_outputs", [1, 2])
def test_condition_on_observations_equals_refit(num_outputs):
    model = make_botorch_model(num_outputs=num_outputs)
    model.eval()
    test_x = _test_points()
    model.posterior(test_x)
    new_x = _test_points(m=3)[:3] * 0.5
    new_y = torch.randn(3, num_outputs, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    conditioned = model.condition_on_observations(new_x, new_y)
    # The same finite model on all the data (state copied, targets standardized as the model saw them).
    full_x = torch.cat([model.train_inputs[0][..., :, :], model.transform_inputs(new_x).expand(*model.train_inputs[0].shape[:-2], 3, 3)], -2)
    standardized, _ = model.outcome_transform(new_y)
    full_y = torch.cat([model.train_targets, standardized.mT.reshape(model.train_targets.shape[:-1] + (3,))], -1)
    reference = make_botorch_model(num_outputs=num_outputs)
    reference.load_state_dict(model.state_dict())
    reference.eval()
    reference.set_train_data(full_x, full_y, strict=False)
    x = model.transform_inputs(test_x)
    torch.testing.assert_close(conditioned(x).mean, reference(x).mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(conditioned(x).variance, reference(x).variance, rtol=0, atol=1e-8)


def _three_output_model_with_fixed_noise() -> RandomFeatureSingleTaskGP:
    generator = torch.Generator().manual_seed(0)
    x = 2 * torch.rand(40, 3, generator=generator, dtype=torch.float64) - 1
    y = torch.stack([x.sum(-1), x.prod(-1), torch.sin(x).sum(-1)], -1)
    noise = torch.full((40, 3), 1e-2, dtype=torch.float64)
    return RandomFeatureSingleTaskGP(x, y, noise, num_features=32, seed=0, outcome_transform=Standardize(3))


@pytest.mark.parametrize(
    "build, keep",
    [
        (lambda: make_botorch_model(num_outputs=2), [1]),
        (_three_output_model_with_fixed_noise, [2]),
        (_three_output_model_with_fixed_noise, [0, 2]),
    ],
    ids=["inferred-noise", "fixed-noise-one", "fixed-noise-two"],
)
def test_subset_output_matches_the_full_model(build, keep):
    model = build()
    model.eval()
    test_x = _test_points()
    full = model.posterior(test_x)
    subset = model.subset_output(keep)
    subset.eval()
    posterior = subset.posterior(test_x)
    torch.testing.assert_close(posterior.mean, full.mean[..., keep], rtol=0, atol=1e-8)
    torch.testing.assert_close(posterior.variance, full.variance[..., keep], rtol=0, atol=1e-8)


@pytest.mark.parametrize("num_outputs", [1, 2])
def test_state_dict_into_fresh_model_and_pickle(num_outputs):
    model = make_botorch_model(num_outputs=num_outputs, seed=0)
    _fit(model)
    model.eval()
    test_x = _test_points()
    expected = model.posterior(test_x)
    fresh = make_botorch_model(num_outputs=num_outputs, seed=1)  # different feature draws until loaded
    fresh.load_state_dict(model.state_dict())
    fresh.eval()
    torch.testing.assert_close(fresh.posterior(test_x).mean, expected.mean, rtol=0, atol=1e-10)
    restored = pickle.loads(pickle.dumps(model))
    torch.testing.assert_close(restored.posterior(test_x).variance, expected.variance, rtol=0, atol=1e-10)


def test_plain_single_task_gp_with_gprf_kernel_keeps_working():
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(30, 2, generator=generator, dtype=torch.float64)
    y = torch.sin(5 * x).sum(-1, keepdim=True)
    kernel = ScaleKernel(PolynomialSketchKernel(num_features=32, num_dims=2, degree=2, seed=0))
    model = SingleTaskGP(x, y, covar_module=kernel)
    _fit(model)
    assert model.posterior(x[:4]).mean.shape == (4, 1)


def test_non_feature_kernel_is_rejected_by_name():
    x = torch.rand(10, 2, dtype=torch.float64)
    with pytest.raises(TypeError, match="RBFKernel has no finite feature map"):
        RandomFeatureSingleTaskGP(x, x.sum(-1, keepdim=True), covar_module=ScaleKernel(RBFKernel()))


def test_wrong_kernel_batch_shape_is_rejected():
    x = torch.rand(10, 2, dtype=torch.float64)
    kernel = RandomFourierKernel(16, num_dims=2)
    with pytest.raises(ValueError, match=r"batch_shape=torch.Size\(\[2\]\)"):
        RandomFeatureSingleTaskGP(x, torch.randn(10, 2, dtype=torch.float64), covar_module=kernel)


def test_complex_posterior_kernel_is_rejected():
    x = torch.rand(10, 2, dtype=torch.float64)
    kernel = PolynomialSketchKernel(16, num_dims=2, degree=2, complex=True, posterior="complex", seed=0)
    with pytest.raises(NotImplementedError, match="posterior='complex'"):
        RandomFeatureSingleTaskGP(x, x.sum(-1, keepdim=True), covar_module=kernel)
