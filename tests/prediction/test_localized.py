"""LocalizedPredictionStrategy: dispatch, per-point formulas, chunking, clusters, far-field behaviour, GP level."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from linear_operator.operators import DiagLinearOperator, ZeroLinearOperator

from gprf.exceptions import DispatchFallbackWarning
from gprf.kernels import LocalizedMaclaurinKernel, MaclaurinKernel
from gprf.linalg import FeatureRootLinearOperator, feature_root
from gprf.metrics import gaussian_kl
from gprf.prediction import FeatureSpacePredictionStrategy, LocalizedPredictionStrategy
from gprf.testing import ExactGPModel, train_by_mll

pytestmark = pytest.mark.usefixtures("single_thread")


def _data(n=60, d=2, seed=0, dtype=torch.float64, batch=()):
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(*batch, n, d, generator=generator, dtype=dtype)
    y = torch.sin(6 * x).sum(-1) + 0.05 * torch.randn(*batch, n, generator=generator, dtype=dtype)
    return x, y


def _model(x, y, kernel_cls=LocalizedMaclaurinKernel, num_features=32, scale=True, batch_shape=torch.Size(), **kwargs):
    d = x.size(-1)
    if kernel_cls is MaclaurinKernel:
        kwargs["kernel"] = "gaussian"
    base = kernel_cls(num_features, d, ard_num_dims=d, sketch="srht", seed=0, batch_shape=batch_shape, **kwargs)
    covar = ScaleKernel(base, batch_shape=batch_shape) if scale else base
    likelihood = gpytorch.likelihoods.GaussianLikelihood(batch_shape=batch_shape)
    model = ExactGPModel(x, y, likelihood, covar, batch_shape=batch_shape).to(x.dtype)
    base.lengthscale = torch.tensor([0.15, 0.25][:d], dtype=x.dtype)
    if scale:
        covar.outputscale = 1.3
    likelihood.noise = 0.02
    model.mean_module.constant.data.fill_(0.4)
    base.refit_allocation(x)
    return model.eval()


def _reference(model, x, y, test_x):
    """Per-test-point weight-space posterior re-centred at the test point, dense float64, one point at a time."""
    covar = model.covar_module
    base = covar.base_kernel if isinstance(covar, ScaleKernel) else covar
    amplitude = covar.outputscale.sqrt() if isinstance(covar, ScaleKernel) else torch.tensor(1.0)
    z, z_test = x / base.lengthscale, test_x / base.lengthscale
    residual = (y - model.mean_module.constant).double()
    noise = model.likelihood.noise.double()
    means, variances = [], []
    for z_star in z_test:
        phi = (amplitude * base.feature_map.real_features_about(z, z_star)).double()
        phi_star = (amplitude * base.feature_map.real_features_about(z_star[None], z_star)).double()
        precision = torch.eye(phi.size(-1), dtype=torch.float64) + phi.mT @ phi / noise
        means.append((phi_star @ torch.linalg.solve(precision, phi.mT @ residual / noise)).squeeze())
        variances.append((phi_star @ torch.linalg.solve(precision, phi_star.mT)).squeeze())
    return torch.stack(means) + model.mean_module.constant.double(), torch.stack(variances)


@pytest.mark.parametrize("scale", [True, False])
def test_dispatch_and_per_point_formulas(scale):
    x, y = _data()
    model = _model(x, y, scale=scale)
    test_x = torch.rand(15, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 1.4 - 0.2
    with torch.no_grad():
        posterior = model(test_x)
    assert type(model.prediction_strategy) is LocalizedPredictionStrategy
    assert isinstance(posterior.lazy_covariance_matrix, DiagLinearOperator)
    mean, variance = _reference(model, x, y, test_x)
    torch.testing.assert_close(posterior.mean, mean, rtol=0, atol=1e-10)
    torch.testing.assert_close(posterior.variance, variance, rtol=0, atol=1e-10)
    noisy = model.likelihood(posterior)
    torch.testing.assert_close(noisy.variance, variance + model.likelihood.noise, rtol=0, atol=1e-10)


def test_chunk_size_does_not_change_predictions():
    x, y = _data()
    test_x = torch.rand(23, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    results = []
    for chunk_size in (1, 7, None):
        with torch.no_grad():
            posterior = _model(x, y, chunk_size=chunk_size)(test_x)
        results.append((posterior.mean, posterior.variance))
    for mean, variance in results[:-1]:
        torch.testing.assert_close(mean, results[-1][0], rtol=0, atol=1e-12)
        torch.testing.assert_close(variance, results[-1][1], rtol=0, atol=1e-12)


def test_far_from_the_data_localized_returns_to_the_prior_and_global_collapses():
    x, y = _data()
    far_x = torch.tensor([[30.0, 30.0], [-25.0, 4.0], [0.5, 40.0]], dtype=torch.float64)
    constant = 0.4
    # Scaled distances to the data are > 100 lengthscales: the exact k(x*, X) is below exp(-5000).
    for kwargs in ({}, {"centers": "cluster", "threshold": 1.0}):
        model = _model(x, y, **kwargs)
        outputscale, noise = model.covar_module.outputscale.detach(), model.likelihood.noise.detach()
        with torch.no_grad():
            noisy = model.likelihood(model(far_x))
        torch.testing.assert_close(noisy.mean, torch.full((3,), constant, dtype=torch.float64), rtol=0, atol=1e-12)
        torch.testing.assert_close(noisy.variance, (outputscale + noise).expand(3), rtol=0, atol=1e-12)
    global_model = _model(x, y, kernel_cls=MaclaurinKernel)
    with torch.no_grad():
        collapsed = global_model(far_x)
    assert type(global_model.prediction_strategy) is FeatureSpacePredictionStrategy
    torch.testing.assert_close(collapsed.mean, torch.full((3,), constant, dtype=torch.float64), rtol=0, atol=1e-12)
    # The prior variance is lost (read the diagonal: MultivariateNormal.variance clamps at 1e-10).
    assert collapsed.lazy_covariance_matrix.diagonal().max() < 1e-12 * outputscale


def test_clusters_without_outside_recentring_follow_algorithm_1():
    x, y = _data()
    far_x = torch.tensor([[30.0, 30.0]], dtype=torch.float64)
    model = _model(x, y, centers="cluster", threshold=1.0, recentre_outside=False)
    with torch.no_grad():
        assert model(far_x).lazy_covariance_matrix.diagonal().max() < 1e-12  # the nearest centre is far away too


@pytest.mark.filterwarnings("ignore::gpytorch.utils.warnings.GPInputWarning")
def test_tiny_threshold_reproduces_per_point_centring_on_training_inputs():
    x, y = _data(n=40)
    clustered = _model(x, y, centers="cluster", threshold=1e-9, max_centers=41)
    per_point = _model(x, y)
    with torch.no_grad():
        a, b = clustered(x), per_point(x)
    assert clustered.prediction_strategy.local_posteriors.centers.size(-2) == 41
    torch.testing.assert_close(a.mean, b.mean, rtol=0, atol=1e-10)
    torch.testing.assert_close(a.variance, b.variance, rtol=0, atol=1e-10)


def test_one_cluster_equals_the_global_predictor():
    x, y = _data()
    test_x = torch.cat(
        [x, 0.2 + 0.6 * torch.rand(20, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)]
    )
    one = _model(x, y, centers="cluster", max_centers=1)
    global_model = _model(x, y, kernel_cls=MaclaurinKernel)
    with torch.no_grad():
        a, b = one(test_x), global_model(test_x)
    centers = one.prediction_strategy.local_posteriors.centers
    torch.testing.assert_close(centers.squeeze(0), one.covar_module.base_kernel.feature_map.center)
    torch.testing.assert_close(a.mean, b.mean, rtol=0, atol=1e-10)
    torch.testing.assert_close(a.variance, b.variance, rtol=0, atol=1e-10)


@pytest.mark.parametrize("centers", ["test", "cluster"])
def test_a_lengthscale_changed_in_eval_mode_rebuilds_the_local_factors(centers):
    x, y = _data()
    test_x = 0.2 + 0.6 * torch.rand(5, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    model = _model(x, y, centers=centers)
    with torch.no_grad():
        before = model(test_x).mean
        model.covar_module.base_kernel.lengthscale = torch.tensor([0.3, 0.2], dtype=torch.float64)
        after = model(test_x)
    fresh = _model(x, y, centers=centers)
    fresh.covar_module.base_kernel.lengthscale = torch.tensor([0.3, 0.2], dtype=torch.float64)
    with torch.no_grad():
        expected = fresh(test_x)
    assert (after.mean - before).abs().max() > 1e-3
    torch.testing.assert_close(after.mean, expected.mean, rtol=0, atol=1e-10)
    torch.testing.assert_close(after.variance, expected.variance, rtol=0, atol=1e-10)


def test_given_centres_including_an_empty_one():
    x, y = _data()
    # The last centre has no training point near it (an empty cluster); its factor is still well defined.
    centers = torch.tensor([[0.25, 0.25], [0.75, 0.75], [0.2, 0.8], [6.0, 6.0]], dtype=torch.float64)
    model = _model(x, y, centers=centers, recentre_outside=False)
    per_point = _model(x, y)
    with torch.no_grad():
        at_centres, reference = model(centers), per_point(centers)
    # A test point at a centre is predicted by the model centred at itself, i.e. exactly as in "test" mode.
    torch.testing.assert_close(at_centres.mean, reference.mean, rtol=0, atol=1e-10)
    torch.testing.assert_close(at_centres.variance, reference.variance, rtol=0, atol=1e-10)
    torch.testing.assert_close(at_centres.variance[-1], model.covar_module.outputscale.detach(), rtol=0, atol=1e-10)


@pytest.mark.parametrize("centers", ["test", "cluster"])
def test_batched_models_match_each_member(centers):
    x, y = _data(batch=(2,))
    kwargs = {"centers": centers} if centers == "test" else {"centers": centers, "threshold": 1.5}
    model = _model(x, y, batch_shape=torch.Size([2]), **kwargs)
    model.covar_module.base_kernel.lengthscale = torch.tensor([[[0.15, 0.25]], [[0.3, 0.2]]], dtype=torch.float64)
    model.train().eval()
    test_x = torch.rand(2, 9, 2, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    with torch.no_grad():
        posterior = model(test_x)
    assert posterior.mean.shape == (2, 9)
    for b in range(2):
        if centers == "cluster":
            # Batch members share the number of clusters, so compare with that member's centres given explicitly.
            scaled = model.prediction_strategy.local_posteriors.centers[b]
            kwargs = {"centers": scaled * model.covar_module.base_kernel.lengthscale[b].detach()}
        member = _model(x[b], y[b], **kwargs)
        member.covar_module.base_kernel = model.covar_module.base_kernel[b]
        member.covar_module.base_kernel._init_centers(kwargs["centers"], None, 100)
        member.covar_module.outputscale = model.covar_module.outputscale[b]
        member.train().eval()
        with torch.no_grad():
            single = member(test_x[b])
        torch.testing.assert_close(posterior.mean[b], single.mean, rtol=0, atol=1e-10)
        torch.testing.assert_close(posterior.variance[b], single.variance, rtol=0, atol=1e-10)


def test_skip_variances_and_gradients_reach_test_inputs():
    x, y = _data()
    model = _model(x, y)
    test_x = (x[:4] + 0.05).requires_grad_(True)
    posterior = model(test_x)
    (posterior.mean.sum() + posterior.variance.sum()).backward()
    assert torch.isfinite(test_x.grad).all() and test_x.grad.abs().sum() > 0
    with gpytorch.settings.skip_posterior_variances(), torch.no_grad():
        skipped = model(test_x)
    assert isinstance(skipped.lazy_covariance_matrix, ZeroLinearOperator)
    torch.testing.assert_close(skipped.mean, posterior.mean.detach())


def test_float32_model_matches_float64():
    x, y = _data()
    test_x = torch.rand(10, 2, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    with torch.no_grad():
        reference = _model(x, y, centers="cluster")(test_x)
        single = _model(x.float(), y.float(), centers="cluster")(test_x.float())
    assert single.mean.dtype == torch.float32
    torch.testing.assert_close(single.mean.double(), reference.mean, rtol=0, atol=1e-4)
    torch.testing.assert_close(single.variance.double(), reference.variance, rtol=0, atol=1e-4)


def test_fantasies_are_rejected_and_fallback_is_loud():
    x, y = _data()
    model = _model(x, y)
    model(x[:2])
    with pytest.raises(NotImplementedError, match="fantasy"):
        model.get_fantasy_model(x[:2] + 0.1, y[:2])
    strategy = model.prediction_strategy
    root = feature_root(model.covar_module(x[:3]))
    plain = FeatureRootLinearOperator(root.features, outputscale=root.outputscale, versions=root.versions)  # no inputs
    with pytest.warns(DispatchFallbackWarning, match="global feature-space"):
        strategy.exact_prediction(
            torch.zeros(3, dtype=torch.float64), plain, model.covar_module(x[:3], x).evaluate_kernel()
        )


def test_gp_level_sinc_training_and_kl():
    """Sinc toy of paper 002: MLL on the exact GP, then F = 10 features (degrees 1..9, exact in 1-D)."""
    generator = torch.Generator().manual_seed(0)
    x = 3 * torch.rand(50, 1, generator=generator, dtype=torch.float64) - 1.5
    y = torch.sinc(5 * x[:, 0]) + 0.1 * torch.randn(50, generator=generator, dtype=torch.float64)
    test_x = torch.linspace(-2.25, 2.25, 200, dtype=torch.float64).unsqueeze(-1)
    exact = ExactGPModel(x, y, gpytorch.likelihoods.GaussianLikelihood(), ScaleKernel(RBFKernel())).double()
    exact.covar_module.base_kernel.lengthscale = 0.2
    train_by_mll(exact, x, y, steps=150)
    exact.eval()

    def approximate(kernel_cls, **kwargs):
        base = kernel_cls(10, 1, allocation=[1] * 9, seed=0, **kwargs)
        model = ExactGPModel(x, y, gpytorch.likelihoods.GaussianLikelihood(), ScaleKernel(base)).double()
        missing = model.load_state_dict(exact.state_dict(), strict=False).missing_keys
        assert all(".feature_map." in key for key in missing)  # hyperparameters copied, features kept
        base.feature_map.center = (x / base.lengthscale).mean(0).detach()  # the training mean (paper 002, Alg. 1)
        return model.eval()

    with torch.no_grad():
        reference = exact.likelihood(exact(test_x))
        kls = {}
        for name, model in (
            ("global", approximate(MaclaurinKernel, kernel="gaussian")),
            ("test", approximate(LocalizedMaclaurinKernel)),
        ):
            noisy = model.likelihood(model(test_x))
            kls[name] = gaussian_kl(noisy.mean, noisy.variance, reference.mean, reference.variance).item()
    assert exact.covar_module.base_kernel.lengthscale.item() < 0.2  # MLL found the short lengthscale
    assert kls["test"] < 0.01 and kls["global"] > 0.2, kls


def test_botorch_single_task_gp_and_fresh_model():
    pytest.importorskip("botorch")
    from botorch.models import SingleTaskGP

    x, y = _data(n=40)
    centers = torch.tensor([[0.3, 0.3], [0.7, 0.6]], dtype=torch.float64)

    def build(seed):
        base = LocalizedMaclaurinKernel(32, 2, centers=centers, ard_num_dims=2, sketch="srht", seed=seed)
        return SingleTaskGP(x, y.unsqueeze(-1), covar_module=ScaleKernel(base))

    model = build(0)
    model.covar_module.base_kernel.refit_allocation(x)
    test_x = torch.rand(6, 2, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    posterior = model.posterior(test_x)
    assert type(model.prediction_strategy) is LocalizedPredictionStrategy
    assert posterior.mean.shape == (6, 1) and (posterior.variance > 0).all()
    fresh = build(7)
    fresh.load_state_dict(model.state_dict())
    fresh_posterior = fresh.posterior(test_x)
    torch.testing.assert_close(fresh_posterior.mean, posterior.mean, rtol=0, atol=1e-10)
    torch.testing.assert_close(fresh_posterior.variance, posterior.variance, rtol=0, atol=1e-10)
