"""FeatureSpacePredictionStrategy: exactness against the weight-space posterior, settings, fantasies, and the same
through BoTorch's SingleTaskGP (fitting, posterior, condition_on_observations, fantasize)."""

from __future__ import annotations

from unittest import mock

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from linear_operator.operators import DenseLinearOperator, ZeroLinearOperator

import gprf
from gprf.exceptions import DispatchFallbackWarning, NonFiniteTrainingDataError
from gprf.kernels import RandomFourierKernel
from gprf.linalg import CapacitanceFactor, FeatureRootAddedDiagLinearOperator
from gprf.prediction import FeatureSpacePredictionStrategy
from gprf.testing import ExactGPModel, regression_data, train_by_mll
from tests.helpers.regression import make_model, optimizer_step, weight_space_prediction


def test_dispatch_with_and_without_scale_kernel(data64):
    x, y = data64
    test_x = x[:5] + 0.05
    for covar_module in (
        RandomFourierKernel(64, num_dims=3, seed=0),
        gpytorch.kernels.ScaleKernel(RandomFourierKernel(64, num_dims=3, seed=0)),
    ):
        model = ExactGPModel(x, y, gpytorch.likelihoods.GaussianLikelihood(), covar_module).double().eval()
        model(test_x)
        assert type(model.prediction_strategy) is FeatureSpacePredictionStrategy


def test_matches_weight_space_posterior(data64):
    x, y = data64
    model = make_model(x, y).eval()
    test_x = torch.rand(120, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    posterior = model(test_x)
    mean, covar = weight_space_prediction(model, x, y, test_x, model.likelihood.noise.expand(80))
    torch.testing.assert_close(posterior.mean, mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(posterior.covariance_matrix, covar, rtol=0, atol=1e-8)
    # M > F: a low-rank root; M <= F: a dense full-rank matrix (BoTorch samples with M base samples).
    assert posterior.lazy_covariance_matrix.root_decomposition().root.shape[-1] == 64
    assert isinstance(model(test_x[:10]).lazy_covariance_matrix, DenseLinearOperator)
    # The noisy predictive adds the likelihood noise and stays low rank plus diagonal.
    noisy = model.likelihood(posterior)
    torch.testing.assert_close(noisy.variance, covar.diagonal() + model.likelihood.noise, rtol=0, atol=1e-8)


def test_heteroscedastic_noise(data64):
    x, y = data64
    noise = 0.01 + 0.2 * torch.rand(80, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    likelihood = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise=noise)
    model = make_model(x, y, likelihood=likelihood).eval()
    test_x = x[:20] + 0.01
    posterior = model(test_x)
    mean, covar = weight_space_prediction(model, x, y, test_x, noise)
    torch.testing.assert_close(posterior.mean, mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(posterior.covariance_matrix, covar, rtol=0, atol=1e-8)


def test_batched_models(data64):
    x, y = regression_data(batch_shape=(2,))
    model = make_model(x, y, batch_shape=torch.Size([2])).eval()
    model.likelihood.noise = torch.tensor([[0.02], [0.1]], dtype=torch.float64)
    test_x = torch.rand(2, 15, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    posterior = model(test_x)
    assert posterior.mean.shape == (2, 15)
    for b in range(2):
        sub = make_model(x[b], y[b], seed=0)
        sub.covar_module.base_kernel = model.covar_module.base_kernel[b]
        sub.covar_module.outputscale = model.covar_module.outputscale[b]
        mean, covar = weight_space_prediction(sub, x[b], y[b], test_x[b], model.likelihood.noise[b].expand(80))
        torch.testing.assert_close(posterior.mean[b], mean, rtol=0, atol=1e-8)
        torch.testing.assert_close(posterior.covariance_matrix[b], covar, rtol=0, atol=1e-8)


def test_skip_posterior_variances(data64):
    x, y = data64
    model = make_model(x, y).eval()
    test_x = x[:7] + 0.02
    full = model(test_x)
    with gpytorch.settings.skip_posterior_variances():
        skipped = model(test_x)
    assert isinstance(skipped.lazy_covariance_matrix, ZeroLinearOperator)
    torch.testing.assert_close(skipped.mean, full.mean)


@pytest.mark.parametrize("route", ["features", "points"])
def test_detach_test_caches_controls_hyperparameter_gradients(route, data64):
    x, y = data64
    model = make_model(x, y).eval()
    test_x = x[:6] + 0.03
    with gpytorch.settings.detach_test_caches(False), gprf.settings.covariance_route(route):
        model(test_x).mean.sum().backward()
    grad = model.covar_module.raw_outputscale.grad.clone()
    model.zero_grad()
    mean, _ = weight_space_prediction(model, x, y, test_x, model.likelihood.noise.expand(80))
    mean.sum().backward()
    torch.testing.assert_close(grad, model.covar_module.raw_outputscale.grad, rtol=1e-6, atol=1e-10)

    model.zero_grad()
    model.prediction_strategy = None
    with gprf.settings.covariance_route(route):
        model(test_x)  # builds detached caches (the default)
    cache = f"{'weight' if route == 'features' else 'points'}_space_posterior"
    assert getattr(model.prediction_strategy, cache).mean.grad_fn is None


def test_gradients_reach_test_inputs(data64):
    x, y = data64
    model = make_model(x, y).eval()
    test_x = (x[:4] + 0.1).requires_grad_(True)
    posterior = model(test_x)
    (posterior.mean.sum() + posterior.variance.sum()).backward()
    assert torch.isfinite(test_x.grad).all() and test_x.grad.abs().sum() > 0


@pytest.mark.parametrize("noise", ["homoscedastic", "fixed"])
def test_fantasy_model_equals_refit(noise, data64):
    x, y = data64
    new_x = torch.rand(6, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    new_y = torch.randn(6, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    if noise == "fixed":
        train_noise = torch.full((80,), 0.03, dtype=torch.float64)
        likelihood = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise=train_noise)
        fantasy_kwargs = {"noise": torch.full((6,), 0.2, dtype=torch.float64)}
        all_noise = torch.cat([train_noise, fantasy_kwargs["noise"]])
    else:
        likelihood, fantasy_kwargs = None, {}
    model = make_model(x, y, likelihood=likelihood).eval()
    test_x = torch.rand(25, 3, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    model(test_x)
    fantasy = model.get_fantasy_model(new_x, new_y, **fantasy_kwargs)
    assert isinstance(fantasy.prediction_strategy, FeatureSpacePredictionStrategy)
    all_x, all_y = torch.cat([x, new_x]), torch.cat([y, new_y])
    if noise != "fixed":
        all_noise = model.likelihood.noise.expand(86)
    mean, covar = weight_space_prediction(model, all_x, all_y, test_x, all_noise)
    posterior = fantasy(test_x)
    torch.testing.assert_close(posterior.mean, mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(posterior.covariance_matrix, covar, rtol=0, atol=1e-8)


def test_batched_fantasies_at_shared_inputs(data64):
    x, y = data64
    model = make_model(x, y).eval()
    test_x = torch.rand(9, 3, generator=torch.Generator().manual_seed(10), dtype=torch.float64)
    model(test_x)
    new_x = torch.rand(4, 3, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    new_y = torch.randn(5, 4, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
    fantasy = model.get_fantasy_model(new_x, new_y)
    posterior = fantasy(test_x)
    assert posterior.mean.shape == (5, 9)
    for f in range(5):
        mean, covar = weight_space_prediction(
            model, torch.cat([x, new_x]), torch.cat([y, new_y[f]]), test_x, model.likelihood.noise.expand(84)
        )
        torch.testing.assert_close(posterior.mean[f], mean, rtol=0, atol=1e-8)
        torch.testing.assert_close(posterior.covariance_matrix[f], covar, rtol=0, atol=1e-8)
    # Fantasies of fantasies keep updating the factor.
    fantasy2 = fantasy.get_fantasy_model(new_x[:1] + 0.1, new_y[:, :1])
    assert fantasy2(test_x).mean.shape == (5, 9)


def test_fantasy_does_not_refactor_training_data(data64):
    x, y = data64
    model = make_model(x, y).eval()
    test_x = x[:3] + 0.2
    model(test_x)
    refactor = AssertionError("the N x F training statistics were factored again")
    with mock.patch.object(CapacitanceFactor, "from_gram", side_effect=refactor):
        fantasy = model.get_fantasy_model(x[:2] + 0.3, y[:2])
        fantasy(test_x)


def test_fallback_is_loud(data64):
    x, y = data64
    model = make_model(x, y).eval()
    model(x[:2] + 0.1)
    exact_prior = model.forward(x)
    dense_prior = gpytorch.distributions.MultivariateNormal(
        exact_prior.mean, DenseLinearOperator(exact_prior.covariance_matrix)
    )
    strategy = FeatureSpacePredictionStrategy([x], dense_prior, y, model.likelihood)
    test_x = x[:4] + 0.05
    joint = model.forward(torch.cat([x, test_x]))
    with pytest.warns(DispatchFallbackWarning, match="falling back"):
        mean, covar = strategy.exact_prediction(
            joint.mean[80:],
            DenseLinearOperator(joint.covariance_matrix[80:, 80:]),
            DenseLinearOperator(joint.covariance_matrix[80:, :80]),
        )
    reference = model(test_x)
    torch.testing.assert_close(mean, reference.mean, rtol=1e-6, atol=1e-8)


def test_marginal_likelihood_uses_woodbury_path(data64):
    x, y = data64
    model = make_model(x, y).train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    original = FeatureRootAddedDiagLinearOperator.inv_quad_logdet
    with mock.patch.object(
        FeatureRootAddedDiagLinearOperator, "inv_quad_logdet", autospec=True, side_effect=original
    ) as spy:
        with mock.patch.object(DenseLinearOperator, "inv_quad_logdet", side_effect=AssertionError("dense N x N path")):
            loss = -mll(model(x), y)
    assert spy.call_count == 1
    # Same value as the dense Gaussian log density.
    covar = model.covar_module(x).to_dense() + model.likelihood.noise * torch.eye(80, dtype=torch.float64)
    dense = torch.distributions.MultivariateNormal(model.mean_module(x), covar).log_prob(y) / 80
    torch.testing.assert_close(-loss, dense, rtol=1e-10, atol=1e-10)


def test_training_improves_fit_and_predicts(data64):
    x, y = regression_data(n=200)
    model = make_model(x, y, num_features=128)
    losses = train_by_mll(model, x, y, steps=60)
    assert losses[-1] < losses[0] - 0.5
    model.eval()
    test_x, test_y = regression_data(n=100, seed=5)
    rmse = (model(test_x).mean - test_y).square().mean().sqrt()
    assert rmse < 0.25 * test_y.std()


def test_float32_at_small_noise():
    x, y = regression_data(n=400)
    test_x, _ = regression_data(n=50, seed=3)
    predictions = {}
    for dtype in (torch.float64, torch.float32):
        likelihood = gpytorch.likelihoods.GaussianLikelihood(noise_constraint=gpytorch.constraints.GreaterThan(1e-6))
        model = make_model(x.to(dtype), y.to(dtype), likelihood=likelihood, num_features=256).to(dtype)
        likelihood.noise = 1e-4
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
        loss = -mll(model(x.to(dtype)), y.to(dtype))
        loss.backward()
        assert torch.isfinite(loss) and all(
            torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None
        )
        model.eval()
        posterior = model(test_x.to(dtype))
        predictions[dtype] = (posterior.mean.double(), posterior.variance.double(), loss.double())
    mean64, var64, loss64 = predictions[torch.float64]
    mean32, var32, loss32 = predictions[torch.float32]
    assert mean32.dtype == torch.float64  # (converted above) the float32 model returned float32
    torch.testing.assert_close(mean32, mean64, rtol=0, atol=2e-3 * mean64.abs().max().item())
    assert (var32 >= 0).all()
    torch.testing.assert_close(var32, var64, rtol=0, atol=1e-3 * model.covar_module.outputscale.item())


CHANGES = {
    "resample_features": lambda model: model.covar_module.base_kernel.resample_features(
        torch.Generator().manual_seed(123)
    ),
    "lengthscale setter": lambda model: setattr(
        model.covar_module.base_kernel, "lengthscale", torch.tensor([0.5, 0.9, 0.3], dtype=torch.float64)
    ),
    "optimizer step on the outputscale": lambda model: optimizer_step(model.covar_module.raw_outputscale),
    "optimizer step on the noise": lambda model: optimizer_step(model.likelihood.raw_noise),
    "load_state_dict": lambda model: model.load_state_dict(
        {**model.state_dict(), "covar_module.base_kernel.raw_lengthscale": torch.zeros(1, 3, dtype=torch.float64)}
    ),
}


@pytest.mark.parametrize("route", ["features", "points"])
@pytest.mark.parametrize("change", CHANGES)
def test_predictions_follow_changes_made_in_eval_mode(change, route, data64):
    """A changed hyperparameter or feature draw rebuilds the training cache at the next prediction: the answer is
    the weight-space posterior of the model as it is now (GPyTorch's own exact GP would reuse the old cache)."""
    x, y = data64
    model = make_model(x, y).eval()
    test_x = x[:5] + 0.1
    cache = f"{'weight' if route == 'features' else 'points'}_space_posterior"
    with gprf.settings.covariance_route(route):
        before = model(test_x).mean
        posterior = getattr(model.prediction_strategy, cache)
        model(test_x)
        assert getattr(model.prediction_strategy, cache) is posterior  # unchanged model: the cache is kept
        CHANGES[change](model)
        mean, covariance = weight_space_prediction(model, x, y, test_x, model.likelihood.noise.expand(80))
        prediction = model(test_x)
    torch.testing.assert_close(prediction.mean, mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(prediction.covariance_matrix, covariance, rtol=0, atol=1e-8)
    assert (prediction.mean - before).abs().max() > 1e-3  # the change mattered


def test_fantasy_models_keep_their_caches_and_refuse_new_draws(data64):
    x, y = data64
    model = make_model(x, y).eval()
    model(x[:2])
    fantasy = model.get_fantasy_model(x[:2] + 0.3, y[:2])
    expected = fantasy(x[:4]).mean
    model.covar_module.base_kernel.lengthscale = 2.0  # the original model's kernel: the fantasy has a copy
    torch.testing.assert_close(fantasy(x[:4]).mean, expected, rtol=0, atol=0)
    fantasy.covar_module.base_kernel.resample_features(torch.Generator().manual_seed(123))
    with pytest.raises(RuntimeError, match=r"fantasy model keeps the caches.*model.train\(\) and then model.eval"):
        fantasy(x[:4])


def test_non_finite_training_targets_are_refused_at_prediction():
    x, y = regression_data(n=50)
    y[[2, 9, 30]] = float("nan")
    model = make_model(x, y).eval()
    with pytest.raises(NonFiniteTrainingDataError, match="^3 of 50 training points"):
        model(x[:4])


# ---------------------------------------------------------------------------------------- BoTorch's SingleTaskGP
def _botorch_model(num_outputs: int, n: int = 60, d: int = 3):
    """SingleTaskGP (Normalize, Standardize) with a ScaleKernel(RandomFourierKernel) covariance."""
    pytest.importorskip("botorch")
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Normalize, Standardize

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


@pytest.mark.botorch
@pytest.mark.parametrize("num_outputs", [1, 2])
def test_fit_posterior_and_conditioning(num_outputs):
    from botorch.fit import fit_gpytorch_mll
    from gpytorch.mlls import ExactMarginalLogLikelihood

    model, train_x, train_y = _botorch_model(num_outputs)
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
    reference, _, _ = _botorch_model(num_outputs)
    reference.load_state_dict(model.state_dict())
    reference.eval()
    standardized_new_y, _ = model.outcome_transform(new_y)
    train_x, train_y = reference.train_inputs[0], reference.train_targets
    reference.set_train_data(
        torch.cat([train_x, model.transform_inputs(new_x).expand(*train_x.shape[:-2], 3, 3)], dim=-2),
        torch.cat([train_y, standardized_new_y.mT.reshape(train_y.shape[:-1] + (3,))], dim=-1),
        strict=False,
    )
    expected = reference(model.transform_inputs(test_x))
    actual = conditioned(model.transform_inputs(test_x))
    torch.testing.assert_close(actual.mean, expected.mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(actual.variance, expected.variance, rtol=0, atol=1e-8)


@pytest.mark.botorch
def test_fantasize_and_sample():
    from botorch.sampling import SobolQMCNormalSampler

    model, _, _ = _botorch_model(1)
    model.eval()
    test_x = torch.rand(5, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64) * 4
    model.posterior(test_x)
    sampler = SobolQMCNormalSampler(sample_shape=torch.Size([4]), seed=0)
    fantasy = model.fantasize(test_x[:2], sampler=sampler)
    posterior = fantasy.posterior(test_x)
    assert isinstance(fantasy.prediction_strategy, FeatureSpacePredictionStrategy)
    # Each of the 4 fantasies is the model refitted on the training data plus its two fantasized observations.
    reference, _, _ = _botorch_model(1)
    reference.load_state_dict(model.state_dict())
    reference.eval()
    full_x = torch.cat([model.train_inputs[0], model.transform_inputs(test_x[:2])], dim=-2)
    for j in range(4):
        reference.set_train_data(full_x, fantasy.train_targets[j], strict=False)
        expected = reference.posterior(test_x)
        torch.testing.assert_close(posterior.mean[j], expected.mean, rtol=0, atol=1e-8)
        torch.testing.assert_close(posterior.variance[j], expected.variance, rtol=0, atol=1e-8)
    torch.testing.assert_close(fantasy.train_targets[:, :-2], model.train_targets.expand(4, -1), rtol=0, atol=0)
    # Posterior sampling with base samples of the test-set size (M <= F and M > F).
    for m in (5, 100):
        x = torch.rand(m, 3, generator=torch.Generator().manual_seed(m), dtype=torch.float64) * 4
        samples = SobolQMCNormalSampler(sample_shape=torch.Size([8]), seed=1)(model.posterior(x))
        assert samples.shape == (8, m, 1) and torch.isfinite(samples).all()


# ---------------------------------------------------------------------------------------- the points route
ROUTES = ("points", "features")


def _few_points_model(batch_shape=torch.Size(), heteroscedastic=False):
    """20 points, 64 features (the points route is the cheaper one), non-default hyperparameters."""
    generator = torch.Generator().manual_seed(5)
    x = torch.rand(*batch_shape, 20, 3, generator=generator, dtype=torch.float64)
    y = torch.sin(4 * x).sum(-1) + 0.1 * torch.randn(*batch_shape, 20, generator=generator, dtype=torch.float64)
    likelihood = None
    if heteroscedastic:
        noise = 0.01 + 0.2 * torch.rand(*batch_shape, 20, generator=generator, dtype=torch.float64)
        likelihood = gpytorch.likelihoods.FixedNoiseGaussianLikelihood(noise=noise)
    return make_model(x, y, likelihood=likelihood, batch_shape=batch_shape), x, y


def _spy(name):
    """A mock that records the calls of ``name`` and runs it."""
    import importlib

    module_name, attribute = name.rsplit(".", 1)
    return mock.patch(name, wraps=getattr(importlib.import_module(module_name), attribute))


@pytest.mark.parametrize(("batch_shape", "heteroscedastic"), [((), False), ((2,), False), ((), True)])
def test_both_routes_give_the_same_marginal_likelihood_and_gradients(batch_shape, heteroscedastic):
    results = {}
    for route in ROUTES:
        model, x, y = _few_points_model(torch.Size(batch_shape), heteroscedastic)
        model.train()
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
        spy = _spy("gprf.linalg.feature_root_added_diag_operator._dense_terms")
        with gprf.settings.covariance_route(route), gpytorch.settings.fast_computations(log_prob=True), spy as dense:
            loss = -mll(model(x), y).sum()
            gradients = torch.autograd.grad(loss, [p for p in model.parameters() if p.requires_grad])
        assert dense.called == (route == "points")
        results[route] = (loss, gradients)
    torch.testing.assert_close(results["points"][0], results["features"][0], rtol=0, atol=1e-8)
    for points, features in zip(results["points"][1], results["features"][1], strict=True):
        torch.testing.assert_close(points, features, rtol=0, atol=1e-8)


@pytest.mark.parametrize(
    ("batch_shape", "heteroscedastic", "test_shape"),
    [((), False, (6,)), ((), False, (5, 4)), ((2,), False, (5, 2, 4)), ((), True, (7,))],
)
def test_both_routes_give_the_same_posterior_and_gradients(batch_shape, heteroscedastic, test_shape):
    results = {}
    for route in ROUTES:
        model, x, y = _few_points_model(torch.Size(batch_shape), heteroscedastic)
        model.eval()
        test_x = torch.rand(*test_shape, 3, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
        test_x.requires_grad_(True)
        with gprf.settings.covariance_route(route), _spy("gprf.prediction.feature_space.factor_points") as points:
            posterior = model(test_x)
            mean, covariance = posterior.mean, posterior.covariance_matrix
            (gradient,) = torch.autograd.grad(mean.sum() + covariance.square().sum(), test_x)
        assert points.called == (route == "points")
        assert covariance.shape == (
            *test_shape[:-1],
            *batch_shape[len(test_shape) - 1 :],
            test_shape[-1],
            test_shape[-1],
        )
        results[route] = (mean, covariance, gradient)
    for points, features in zip(results["points"], results["features"], strict=True):
        torch.testing.assert_close(points, features, rtol=0, atol=1e-8)
    # and against the dense weight-space formulas, for the unbatched homoscedastic case
    if not batch_shape and not heteroscedastic:
        model, x, y = _few_points_model()
        test_x = torch.rand(*test_shape, 3, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
        mean, covar = weight_space_prediction(model, x, y, test_x, model.likelihood.noise.expand(20))
        torch.testing.assert_close(results["points"][0], mean, rtol=0, atol=1e-8)
        torch.testing.assert_close(results["points"][1], covar, rtol=0, atol=1e-8)


def test_auto_route_switches_with_the_number_of_test_points():
    model, x, y = _few_points_model()
    model.eval()
    strategy_route = []
    for num_test in (4, 100):  # 100 test points > 64 features: the low-rank root of the features route
        test_x = torch.rand(num_test, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
        with _spy("gprf.prediction.feature_space.factor_points") as points:
            model(test_x)
        strategy_route.append(model.prediction_strategy.prediction_route(num_test, 64))
        assert points.called == (num_test == 4)
    assert strategy_route == ["points", "features"]


def test_forcing_the_points_route_beyond_its_memory_bound_names_the_setting():
    model, x, y = _few_points_model()
    model.eval()
    with gprf.settings.covariance_route("points", max_points_bytes=20 * 20 * 8 - 1):
        with pytest.raises(ValueError, match=r"covariance_route\('points'\) would form 1 matrices of 20 x 20"):
            model(x[:3] + 0.01)
        model.train()
        with pytest.raises(ValueError, match="max_points_bytes"), gpytorch.settings.fast_computations(log_prob=True):
            gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)(model(x), y)


@pytest.mark.parametrize("route", ["auto", "points", "features"])
def test_fantasies_condition_in_the_route_chosen_and_equal_refits(route):
    model, x, y = _few_points_model()
    model.eval()
    test_x = torch.rand(5, 3, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    new_x = torch.rand(2, 3, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    new_y = torch.randn(3, 2, generator=torch.Generator().manual_seed(10), dtype=torch.float64)
    more_x = torch.rand(3, 1, 3, generator=torch.Generator().manual_seed(11), dtype=torch.float64)  # one per fantasy
    more_y = torch.randn(3, 1, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
    with gprf.settings.covariance_route(route):
        model(test_x)
        fantasy = model.get_fantasy_model(new_x, new_y)  # shared inputs, 3 fantasies
        posterior = fantasy(test_x)
        chained = fantasy.get_fantasy_model(more_x, more_y)  # a fantasy of the fantasy, its own input per fantasy
        chained_posterior = chained(test_x)
    expected_route = "features" if route == "features" else "points"  # 20 + 2 points, 64 features: points
    assert fantasy.prediction_strategy.prediction_route(5, 64) == expected_route
    assert chained.prediction_strategy.prediction_route(5, 64) == expected_route
    reference, _, _ = _few_points_model()
    for j in range(3):
        reference.set_train_data(torch.cat([x, new_x]), torch.cat([y, new_y[j]]), strict=False)
        expected = reference.eval()(test_x)
        torch.testing.assert_close(posterior.mean[j], expected.mean, rtol=0, atol=1e-8)
        torch.testing.assert_close(posterior.covariance_matrix[j], expected.covariance_matrix, rtol=0, atol=1e-8)
        reference.set_train_data(torch.cat([x, new_x, more_x[j]]), torch.cat([y, new_y[j], more_y[j]]), strict=False)
        expected = reference.eval()(test_x)
        torch.testing.assert_close(chained_posterior.mean[j], expected.mean, rtol=0, atol=1e-8)
        torch.testing.assert_close(
            chained_posterior.covariance_matrix[j], expected.covariance_matrix, rtol=0, atol=1e-8
        )


def test_float32_models_take_the_points_route_in_the_factor_dtype():
    # Both routes factor in float64 from the same float32 features (agreeing to ~1e-12) and round the answer to float32
    # once: at most one float32 ulp (2^-23 relative) apart, plus an absolute floor for entries near zero.
    results = {}
    for route in ROUTES:
        model, x, y = _few_points_model()
        model = model.float().eval()
        test_x = torch.rand(6, 3, generator=torch.Generator().manual_seed(6)).float()
        with gprf.settings.covariance_route(route), _spy("gprf.linalg.points_factor.checked_cholesky") as cholesky:
            posterior = model(test_x)
        assert cholesky.called == (route == "points")
        if route == "points":
            assert cholesky.call_args.args[0].dtype == torch.float64
        results[route] = (posterior.mean, posterior.covariance_matrix)
        assert posterior.mean.dtype == torch.float32
    for points, features in zip(results["points"], results["features"], strict=True):
        torch.testing.assert_close(points, features, rtol=2**-23, atol=1e-9)
