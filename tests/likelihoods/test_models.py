"""GP-level tests of Dirichlet classification: dense references, fantasies, dtypes/devices, training."""

from __future__ import annotations

from unittest import mock

import gpytorch
import numpy as np
import pytest
import torch
from gpytorch.kernels import RBFKernel
from linear_operator.operators import LowRankRootLinearOperator
from sklearn import datasets

from gprf.kernels import RandomFourierKernel
from gprf.likelihoods import (
    DirichletClassificationLikelihood,
    DirichletGPModel,
    class_marginals,
    predict,
    predict_proba,
)
from gprf.prediction import FeatureSpacePredictionStrategy

pytestmark = pytest.mark.usefixtures("single_thread")

NUM_CLASSES = 3


def make_data(n: int, seed: int = 0, dtype=torch.float64, batch_shape=()):
    """Three classes by angle around the centre of the unit square (every class present)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(*batch_shape, n, 2, generator=generator, dtype=dtype)
    angle = torch.atan2(x[..., 1] - 0.5, x[..., 0] - 0.5) + torch.pi
    labels = (angle / (2 * torch.pi / NUM_CLASSES)).long().clamp(max=NUM_CLASSES - 1)
    return x, labels


def rff_factory(num_features: int = 32, seed: int = 0):
    return lambda batch_shape: RandomFourierKernel(num_features, num_dims=2, batch_shape=batch_shape, seed=seed)


def make_model(x, labels, kernel="rff", alpha_epsilon=0.05, learn_additional_noise=False):
    likelihood = DirichletClassificationLikelihood(
        labels, num_classes=NUM_CLASSES, alpha_epsilon=alpha_epsilon, learn_additional_noise=learn_additional_noise,
        dtype=x.dtype,
    )
    base = rff_factory() if kernel == "rff" else (lambda batch_shape: RBFKernel(batch_shape=batch_shape))
    model = DirichletGPModel(x, likelihood, base).to(device=x.device, dtype=x.dtype)
    # Distinct per-class hyperparameters so that every factor shows up in the comparisons.
    batch = likelihood.class_batch_shape
    model.covar_module.outputscale = torch.linspace(0.8, 2.0, batch.numel(), dtype=x.dtype).view(batch).to(x.device)
    model.covar_module.base_kernel.lengthscale = torch.linspace(0.2, 0.5, batch.numel(), dtype=x.dtype).view(*batch, 1, 1).to(x.device)
    model.mean_module.constant.data.copy_(torch.linspace(-1.0, 0.5, batch.numel(), dtype=x.dtype).view(batch))
    return model.eval()


def dense_prediction(model, train_x, test_x):
    """Function-space GP formulas with the heteroscedastic per-class noise, dense N x N solves in float64."""
    kernel, likelihood = model.covar_module, model.likelihood
    with torch.no_grad():
        x1, x2 = model.class_inputs(train_x), model.class_inputs(test_x)
        k_train = kernel(x1).to_dense().double()
        k_cross = kernel(x2, x1).to_dense().double()
        k_test = kernel(x2).to_dense().double()
        mean_train, mean_test = model.mean_module(x1).double(), model.mean_module(x2).double()
        noise = likelihood.noise.double()
        system = k_train + torch.diag_embed(noise)
        residual = (likelihood.transformed_targets.double() - mean_train).unsqueeze(-1)
        mean = mean_test + (k_cross @ torch.linalg.solve(system, residual)).squeeze(-1)
        var = (k_test - k_cross @ torch.linalg.solve(system, k_cross.mT)).diagonal(dim1=-2, dim2=-1)
    return mean, var


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


def test_marginals_never_form_the_test_covariance(float64):
    x, labels = make_data(40)
    test_x, _ = make_data(200, seed=2)  # M > F: the predictive covariance is a low-rank root
    model = make_model(x, labels)
    with mock.patch.object(LowRankRootLinearOperator, "to_dense", side_effect=AssertionError("M x M formed")):
        probs = predict_proba(model, test_x, num_samples=4, generator=torch.Generator().manual_seed(0))
    assert probs.shape == (200, NUM_CLASSES)


# ---------------------------------------------------------------------- predict_proba
def test_predict_proba_is_unbiased_for_two_classes(float64):
    """For C = 2, E[softmax(f)_1] = E[sigmoid(f_1 - f_0)] is a 1-D Gaussian integral (Gauss-Hermite reference)."""
    x, labels = make_data(30)
    labels = (labels > 0).long()
    likelihood = DirichletClassificationLikelihood(labels, num_classes=2)
    model = DirichletGPModel(x, likelihood, rff_factory()).eval()
    test_x, _ = make_data(6, seed=5)
    num_samples = 4000
    probs = predict_proba(model, test_x, num_samples=num_samples, generator=torch.Generator().manual_seed(1))
    mean, var = class_marginals(model, test_x)
    nodes, weights = (torch.as_tensor(t) for t in np.polynomial.hermite.hermgauss(80))
    z_mean = (mean[1] - mean[0]).unsqueeze(-1)
    z = z_mean + (2 * (var[0] + var[1])).sqrt().unsqueeze(-1) * nodes  # z ~ N(mu, s^2) at the nodes
    sig = torch.sigmoid(z)
    expected = (weights * sig).sum(-1) / torch.pi**0.5
    second = (weights * sig**2).sum(-1) / torch.pi**0.5
    bound = 5 * ((second - expected**2) / num_samples).sqrt()
    assert bool(((probs[:, 1] - expected).abs() <= bound).all()), (probs[:, 1], expected, bound)
    torch.testing.assert_close(probs.sum(-1), torch.ones(6, dtype=torch.float64))


def test_predict_is_reproducible_and_matches_the_argmax(float64):
    x, labels = make_data(40)
    model = make_model(x, labels)
    first = predict_proba(model, x[:10], generator=torch.Generator().manual_seed(3))
    again = predict_proba(model, x[:10], generator=torch.Generator().manual_seed(3))
    assert torch.equal(first, again)
    assert torch.equal(predict(model, x[:10], generator=torch.Generator().manual_seed(3)), first.argmax(-1))


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
    for got, want in zip(class_marginals(fantasy, test_x), class_marginals(reference, test_x)):
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
    with pytest.raises(ValueError, match="num_samples"):
        predict_proba(model, x, num_samples=0)
    model.train()
    with pytest.raises(ValueError, match="model.eval"):
        predict_proba(model, x)
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
    factory = lambda batch_shape: RandomFourierKernel(32, num_dims=2, batch_shape=batch_shape, seed=0)  # noqa: E731
    shared = DirichletGPModel(x, likelihood, factory)
    assert shared.covar_module.base_kernel.feature_map.batch_shape == torch.Size()
    separate = DirichletGPModel(x, likelihood, factory, share_features=False)
    assert separate.covar_module.base_kernel.feature_map.batch_shape == torch.Size([3])
