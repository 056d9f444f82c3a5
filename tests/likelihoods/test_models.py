"""DirichletGPModel: class-batched GPs on the Dirichlet targets — predictions and fantasies equal to dense references
and refits, learned noise, batched labels, dtypes and devices, marginal-likelihood training on digits, shared feature
draws, and bad construction."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from sklearn import datasets

from gprf.kernels import RandomFourierKernel
from gprf.likelihoods import DirichletClassificationLikelihood, DirichletGPModel, class_marginals, predict_proba
from gprf.prediction import FeatureSpacePredictionStrategy
from tests.helpers.classification import NUM_CLASSES, dense_prediction, make_data, make_model

pytestmark = pytest.mark.usefixtures("single_thread")


# ---------------------------------------------------------------------- predictions vs dense references
@pytest.mark.parametrize("kernel", ["rff", "exact"])
def test_predictions_equal_a_dense_computation(float64, kernel):
    x, labels = make_data(40)
    test_x, _ = make_data(15, seed=1)
    model = make_model(x, labels, kernel=kernel)
    mean, var = class_marginals(model, test_x)
    if kernel == "rff":
        assert isinstance(model.prediction_strategy, FeatureSpacePredictionStrategy)
    ref_mean, ref_var = dense_prediction(model, x, test_x)
    assert mean.shape == (NUM_CLASSES, 15)
    torch.testing.assert_close(mean, ref_mean, rtol=1e-7, atol=1e-8)
    torch.testing.assert_close(var, ref_var, rtol=1e-6, atol=1e-8)


def test_learned_additional_noise_enters_training_and_test_noise(float64):
    x, labels = make_data(30)
    model = make_model(x, labels, learn_additional_noise=True)
    model.likelihood.second_noise = torch.full((NUM_CLASSES, 1), 0.2)
    mean, var = class_marginals(model, x[:5])
    ref_mean, ref_var = dense_prediction(model, x, x[:5])  # likelihood.noise includes the learned part
    torch.testing.assert_close(mean, ref_mean, rtol=1e-7, atol=1e-8)
    observed = model.likelihood(model(x[:5]), targets=labels[:5])
    fixed = model.likelihood.transform(labels[:5])[1]
    torch.testing.assert_close(observed.variance, var + fixed + 0.2)


def test_batched_labels_equal_a_dense_computation(float64):
    x, labels = make_data(30, batch_shape=(2,))
    test_x, _ = make_data(7, seed=3, batch_shape=(2,))
    model = make_model(x, labels)
    mean, var = class_marginals(model, test_x)
    assert mean.shape == (2, NUM_CLASSES, 7)
    ref_mean, ref_var = dense_prediction(model, x, test_x)
    torch.testing.assert_close(mean, ref_mean, rtol=1e-7, atol=1e-8)
    torch.testing.assert_close(var, ref_var, rtol=1e-6, atol=1e-8)


# ---------------------------------------------------------------------- fantasies
def refit(model, x, labels, kernel):
    """A fresh model on all points with the same hyperparameters and feature draws (posterior refit)."""
    fresh = make_model(x, labels, kernel=kernel)
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("likelihood.")}
    fresh.load_state_dict(state, strict=False)
    return fresh.eval()


@pytest.mark.parametrize("kernel", ["rff", "exact"])
def test_condition_on_labels_equals_refit(float64, kernel):
    x, labels = make_data(40)
    new_x, new_labels = make_data(6, seed=7)
    test_x, _ = make_data(9, seed=8)
    model = make_model(x, labels, kernel=kernel)
    class_marginals(model, test_x)  # builds the caches the update starts from
    fantasy = model.condition_on_labels(new_x, new_labels)
    if kernel == "rff":
        assert isinstance(fantasy.prediction_strategy, FeatureSpacePredictionStrategy)
    assert torch.equal(fantasy.likelihood.targets, torch.cat([labels, new_labels]))
    reference = refit(model, torch.cat([x, new_x]), torch.cat([labels, new_labels]), kernel)
    for got, want in zip(class_marginals(fantasy, test_x), class_marginals(reference, test_x), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-8)
    before = class_marginals(model, test_x)[0]
    assert not torch.allclose(before, class_marginals(fantasy, test_x)[0])  # the new points moved the classifier


def test_get_fantasy_model_with_the_likelihoods_noise_equals_refit(float64):
    x, labels = make_data(40)
    new_x, new_labels = make_data(5, seed=9)
    model = make_model(x, labels)
    class_marginals(model, new_x)
    targets, noise = model.likelihood.transform(new_labels)
    fantasy = model.get_fantasy_model(model.class_inputs(new_x), targets, noise=noise)
    reference = refit(model, torch.cat([x, new_x]), torch.cat([labels, new_labels]), "rff")
    torch.testing.assert_close(
        predict_proba(fantasy, x[:8], generator=torch.Generator().manual_seed(0)),
        predict_proba(reference, x[:8], generator=torch.Generator().manual_seed(0)),
    )


# ---------------------------------------------------------------------- dtypes, devices, training
def test_float32_and_devices(device, dtype):
    x, labels = make_data(40, dtype=torch.float64)
    reference = make_model(x, labels)
    ref_mean, ref_var = class_marginals(reference, x[:10])
    model = make_model(x.to(device=device, dtype=dtype), labels.to(device))
    model.load_state_dict(reference.state_dict())
    model.eval()
    mean, var = class_marginals(model, x[:10].to(device=device, dtype=dtype))
    assert mean.dtype == dtype and mean.device.type == device.type
    # float32 features carry ~1e-7 relative error, amplified by the F x F solve (kept in float64).
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(mean.cpu().double(), ref_mean, **tol)
    torch.testing.assert_close(var.cpu().double(), ref_var, **tol)
    probs = predict_proba(model, x[:10].to(device=device, dtype=dtype), generator=torch.Generator().manual_seed(0))
    assert probs.device.type == device.type and probs.dtype == dtype


def test_mll_training_classifies_digits():
    """GP-level: 400 digits, RFF (F = 128, float32), 25 Adam steps on the summed per-class marginal likelihoods.

    Training must lower the loss and the held-out MNLL; the accuracy on 300 held-out digits (0.94 measured,
    0.92 before training) must exceed 0.9.
    """
    data = datasets.load_digits()
    x = torch.as_tensor(data.data, dtype=torch.float32) / 16.0
    y = torch.as_tensor(data.target)
    train_x, train_y, test_x, test_y = x[:400], y[:400], x[1200:1500], y[1200:1500]
    likelihood = DirichletClassificationLikelihood(train_y, num_classes=10, dtype=torch.float32)
    model = DirichletGPModel(
        train_x, likelihood, lambda batch_shape: RandomFourierKernel(128, num_dims=64, batch_shape=batch_shape, seed=0)
    ).to(torch.float32)
    model.covar_module.base_kernel.lengthscale = torch.pdist(train_x).median()

    def held_out() -> tuple[float, float]:
        model.eval()
        with torch.no_grad():
            probs = predict_proba(model, test_x, generator=torch.Generator().manual_seed(0))
        accuracy = (probs.argmax(-1) == test_y).float().mean().item()
        return accuracy, -probs.gather(-1, test_y.unsqueeze(-1)).log().mean().item()

    _, mnll_before = held_out()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model.train()
    losses = []
    for _ in range(25):
        optimizer.zero_grad()
        loss = -mll(model(train_x), model.train_targets).sum()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    accuracy, mnll_after = held_out()
    assert losses[-1] < losses[0]
    assert mnll_after < mnll_before
    assert accuracy > 0.9, accuracy


# ---------------------------------------------------------------------- bad input
def test_bad_model_construction(float64):
    x, labels = make_data(20)
    likelihood = DirichletClassificationLikelihood(labels)
    with pytest.raises(ValueError, match="batch_shape=likelihood.class_batch_shape"):
        DirichletGPModel(x, likelihood, RandomFourierKernel(16, num_dims=2))
    with pytest.raises(ValueError, match="train_x must have shape"):
        DirichletGPModel(x[:10], likelihood)
    with pytest.raises(TypeError, match="build the likelihood with dtype=torch.float32"):
        DirichletGPModel(x.float(), likelihood)
    with pytest.raises(TypeError, match="DirichletClassificationLikelihood"):
        DirichletGPModel(x, gpytorch.likelihoods.GaussianLikelihood())


def test_bad_prediction_calls(float64):
    x, labels = make_data(20)
    model = make_model(x, labels)
    model.train()
    with pytest.raises(ValueError, match="model.eval"):
        model.condition_on_labels(x[:2], labels[:2])
    model.eval()
    with pytest.raises(ValueError, match=r"\[0, 3\)"):
        model.condition_on_labels(x[:2], torch.tensor([0, 5]))


def test_random_feature_classes_share_one_feature_draw():
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(30, 2, generator=generator, dtype=torch.float64)
    labels = (x.sum(-1) > 1).long() + (x[:, 0] > 0.7).long()
    likelihood = DirichletClassificationLikelihood(labels, num_classes=3, dtype=torch.float64)

    def factory(batch_shape):
        return RandomFourierKernel(32, num_dims=2, batch_shape=batch_shape, seed=0)

    shared = DirichletGPModel(x, likelihood, factory)
    assert shared.covar_module.base_kernel.feature_map.batch_shape == torch.Size()
    separate = DirichletGPModel(x, likelihood, factory, share_features=False)
    assert separate.covar_module.base_kernel.feature_map.batch_shape == torch.Size([3])
