"""BoTorch's SingleTaskGP with a gprf kernel: fitting, posterior, fantasize and condition_on_observations."""

from __future__ import annotations

import pytest
import torch
from gpytorch.kernels import ScaleKernel

from gprf.prediction import FeatureSpacePredictionStrategy

botorch = pytest.importorskip("botorch")
from botorch.fit import fit_gpytorch_mll  # noqa: E402
from botorch.models import SingleTaskGP  # noqa: E402
from botorch.models.transforms import Normalize, Standardize  # noqa: E402
from botorch.sampling import SobolQMCNormalSampler  # noqa: E402
from gpytorch.mlls import ExactMarginalLogLikelihood  # noqa: E402

from gprf.kernels import RandomFourierKernel  # noqa: E402


pytestmark = pytest.mark.botorch

def _model(num_outputs: int, n: int = 60, d: int = 3):
    generator = torch.Generator().manual_seed(0)
    train_x = 4 * torch.rand(n, d, generator=generator, dtype=torch.float64)
    train_y = torch.stack([torch.sin(train_x).sum(-1), torch.cos(train_x).sum(-1)], -1)[:, :num_outputs]
    batch_shape = torch.Size([num_outputs]) if num_outputs > 1 else torch.Size()
    kernel = ScaleKernel(
        RandomFourierKernel(64, num_dims=d, ard_num_dims=d, batch_shape=batch_shape, seed=0), batch_shape=batch_shape
    )
    model = SingleTaskGP(
        train_x, train_y, covar_module=kernel, input_transform=Normalize(d), outcome_transform=Standardize(num_outputs)
    )
    return model, train_x, train_y


@pytest.mark.parametrize("num_outputs", [1, 2])
def test_fit_posterior_and_conditioning(num_outputs):
    model, train_x, train_y = _model(num_outputs)
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model), optimizer_kwargs={"options": {"maxiter": 30}})
    test_x = torch.rand(7, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 4
    posterior = model.posterior(test_x)
    assert posterior.mean.shape == (7, num_outputs)
    assert type(model.prediction_strategy) is FeatureSpacePredictionStrategy
    assert (posterior.variance > 0).all()

    new_x = torch.rand(3, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64) * 4
    new_y = torch.randn(3, num_outputs, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    conditioned = model.condition_on_observations(new_x, new_y)  # raw inputs: BoTorch transforms them
    assert isinstance(conditioned.prediction_strategy, FeatureSpacePredictionStrategy)

    # Reference: the same model (same hyperparameters, same transforms) built on all the data.
    reference, _, _ = _model(num_outputs)
    reference.load_state_dict(model.state_dict())
    reference.eval()
    standardized_new_y, _ = model.outcome_transform(new_y)
    reference.set_train_data(
        torch.cat([reference.train_inputs[0], model.transform_inputs(new_x).expand(*reference.train_inputs[0].shape[:-2], 3, 3)], dim=-2),
        torch.cat([reference.train_targets, standardized_new_y.mT.reshape(reference.train_targets.shape[:-1] + (3,))], dim=-1),
        strict=False,
    )
    expected = reference(model.transform_inputs(test_x))
    actual = conditioned(model.transform_inputs(test_x))
    torch.testing.assert_close(actual.mean, expected.mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(actual.variance, expected.variance, rtol=0, atol=1e-8)


def test_fantasize_and_sample():
    model, _, _ = _model(1)
    model.eval()
    test_x = torch.rand(5, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * 4
    model.posterior(test_x)
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([4]), seed=0)
    fantasy = model.fantasize(test_x[:2], sampler=sampler)
    posterior = fantasy.posterior(test_x)
    assert posterior.mean.shape == (4, 5, 1)
    assert isinstance(fantasy.prediction_strategy, FeatureSpacePredictionStrategy)
    # Posterior sampling with base samples of the test-set size (M <= F and M > F).
    for m in (5, 100):
        x = torch.rand(m, 3, generator=torch.Generator().manual_seed(m), dtype=torch.float64) * 4
        samples = SobolQMCNormalSampler(sample_shape=torch.Size([8]), seed=1)(model.posterior(x))
        assert samples.shape == (8, m, 1) and torch.isfinite(samples).all()
