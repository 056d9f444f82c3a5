"""gprf.botorch.matheron: posterior paths drawn in weight space never evaluate the prior paths at the training inputs,
follow the model's posterior (also with observed noise, chunked roots and per fantasy of a fantasy model, and for
GPyTorch's sums and products of gprf kernels in a plain SingleTaskGP), and leave non-Gaussian likelihoods to BoTorch.
(Noise-free covariances are refused by the noise helper it shares with the update: see test_update.py.)"""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from botorch.models import SingleTaskGP
from botorch.sampling import SobolQMCNormalSampler
from botorch.sampling.pathwise import draw_matheron_paths, gaussian_update
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import BernoulliLikelihood

import gprf
import gprf.botorch.dispatch as gprf_dispatch
from gprf.botorch import KernelRootFeatureMap, RandomFeatureSingleTaskGP
from gprf.botorch.matheron import (
    capacitance_update_weights,
    feature_space_update_weights,
    points_update_weights,
    training_root,
    update_normals,
    weight_space_matheron_paths,
)
from gprf.kernels import FeatureSumKernel, RandomFourierKernel
from gprf.linalg import CapacitanceFactor
from tests.botorch.conftest import COMPOSITE_DIMS, COMPOSITES, make_botorch_model, make_composite_model
from tests.helpers.gaussian_samples import assert_gaussian_moments

pytestmark = pytest.mark.botorch

NUM_PATHS = 4000
Z_BOUND = 4.5  # two-sided, over a few dozen z-scores per test


def _fixed_noise(n: int = 40) -> dict:
    return {"train_Yvar": 0.05 * torch.rand(n, 1, generator=torch.Generator().manual_seed(1), dtype=torch.float64)}


def test_prior_paths_are_never_evaluated_at_the_training_inputs():
    model = make_botorch_model()
    model.eval()
    with mock.patch.object(
        KernelRootFeatureMap, "forward", autospec=True, side_effect=KernelRootFeatureMap.forward
    ) as spy:
        paths = weight_space_matheron_paths(model, torch.Size([8]))
        assert spy.call_count == 0  # the update needs F-dimensional sums only
        values = paths(torch.rand(5, 3, dtype=torch.float64))
    assert values.shape == (8, 5) and spy.call_count == 1  # the 5 test points, featurised once for both paths


@pytest.mark.parametrize("observed_noise", [False, True])
@pytest.mark.parametrize("chunk_rows", [False, 7])
@pytest.mark.parametrize("route", ["points", "features"])
def test_paths_follow_the_posterior(observed_noise, chunk_rows, route):
    model = make_botorch_model(**(_fixed_noise() if observed_noise else {}))
    model.eval()
    test_x = 2 * torch.rand(5, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64) - 1
    posterior = model.posterior(test_x)
    mean, variance = posterior.mean.detach().squeeze(-1), posterior.variance.detach().squeeze(-1)
    torch.manual_seed(0)
    solver = points_update_weights if route == "points" else capacitance_update_weights
    spy = mock.patch(f"gprf.botorch.matheron.{solver.__name__}", wraps=solver)
    with (
        torch.no_grad(),
        gprf.settings.feature_chunk_size(chunk_rows),
        gprf.settings.covariance_route(route),
        spy as solve,
    ):
        samples = draw_matheron_paths(model, torch.Size([NUM_PATHS]))(test_x)  # S x M
        assert solve.called
    assert_gaussian_moments(samples, mean, variance, Z_BOUND)


@pytest.mark.parametrize("num_outputs", [1, 2])
def test_both_routes_give_the_same_update_weights_for_the_same_noise(num_outputs):
    # Points: Phi^T K^-1 (r - Phi w - eps); features: C^-1 (p - G w - xi) with xi = Phi^T Sigma^-1 eps = G^1/2 z. More
    # points than features, so that G is invertible and z = G^-1/2 xi exists.
    train_yvar = 0.05 * torch.rand(100, num_outputs, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    model = make_botorch_model(num_outputs=num_outputs, n=100, num_features=32, train_Yvar=train_yvar)
    generator = torch.Generator().manual_seed(11)
    with torch.no_grad():
        root, residuals = training_root(model)
        batch_shape = root.source.shape[:-2]
        prior_weights = torch.randn(6, *batch_shape, 32, generator=generator, dtype=torch.float64)
        noise = root.noise.expand(*batch_shape, 100)
        standard = torch.randn(*batch_shape, 100, 6, generator=generator, dtype=torch.float64)
        noise_draws = noise.sqrt().unsqueeze(-1) * standard
        by_points = points_update_weights(root, residuals, prior_weights, noise_draws)

        factor, projection = root.factor(residuals.unsqueeze(-1))
        eye = torch.eye(32, dtype=torch.float64)
        gram = factor.cholesky @ factor.cholesky.mT - eye
        xi = root.scaled_features().mT @ (noise_draws / noise.unsqueeze(-1))
        eigenvalues, eigenvectors = torch.linalg.eigh(gram)
        normals = eigenvectors @ (eigenvalues.rsqrt().unsqueeze(-1) * (eigenvectors.mT @ xi))
        by_features = capacitance_update_weights(factor, gram, projection, prior_weights, normals)
    assert by_points.shape == prior_weights.shape
    torch.testing.assert_close(by_points, by_features, rtol=0, atol=1e-8)


@pytest.mark.parametrize("num_outputs", [1, 2])
def test_paths_follow_the_posterior_with_a_non_zero_mean(num_outputs):
    # The prior paths carry the mean function as their bias, so the update must condition on y - mu(X): with a
    # constant of 1.5 standardized units, projecting y alone moved the path means by hundreds of standard errors.
    model = make_botorch_model(num_outputs=num_outputs, n=30, num_features=32)
    with torch.no_grad():
        model.mean_module.constant.fill_(1.5)
    model.eval()
    test_x = 2 * torch.rand(5, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64) - 1
    posterior = model.posterior(test_x)
    mean, variance = posterior.mean.detach().mT, posterior.variance.detach().mT  # m x M
    torch.manual_seed(0)
    with torch.no_grad():
        paths = draw_matheron_paths(model, torch.Size([NUM_PATHS]))
        samples = paths(test_x) if num_outputs == 1 else paths(test_x.unsqueeze(-3))  # S x [m x] M
    samples = samples.reshape(NUM_PATHS, num_outputs, -1)
    assert_gaussian_moments(samples, mean, variance, Z_BOUND)


def _assert_weight_space_paths_follow(model, reference, test_x: torch.Tensor) -> None:
    """BoTorch's dispatcher draws the paths of the single-output ``model`` in weight space, and they have the mean and
    variance of the posterior of ``reference`` (``model`` itself, or a model of the same distribution) at ``test_x``."""
    posterior = reference.posterior(test_x)
    mean, variance = posterior.mean.detach().squeeze(-1), posterior.variance.detach().squeeze(-1)
    torch.manual_seed(0)
    with (
        torch.no_grad(),
        mock.patch.object(
            gprf_dispatch, "weight_space_matheron_paths", wraps=gprf_dispatch.weight_space_matheron_paths
        ) as weight_space,
    ):
        samples = draw_matheron_paths(model, torch.Size([NUM_PATHS]))(test_x)  # S x M
    assert weight_space.call_count == 1
    assert_gaussian_moments(samples, mean, variance, Z_BOUND)


@pytest.mark.parametrize("plain", [False, True], ids=["RandomFeatureSingleTaskGP", "SingleTaskGP"])
@pytest.mark.parametrize("name", COMPOSITES)
def test_paths_of_composite_kernels_follow_the_posterior(name, plain):
    # Products (joint, permutation, Kronecker), sums with linear and polynomial parts and additive kernels all hand
    # over one root: the weight-space route must reproduce the model's own posterior (non-zero mean included).
    model = make_composite_model(name, plain=plain)
    with torch.no_grad():
        model.mean_module.constant.fill_(0.7)
    model.eval()
    generator = torch.Generator().manual_seed(3)
    test_x = 2 * torch.rand(5, COMPOSITE_DIMS, generator=generator, dtype=torch.float64) - 1
    _assert_weight_space_paths_follow(model, model, test_x)


def test_chunked_roots_give_the_same_paths():
    # More points than features: G has no zero eigenvalues, whose square roots would turn the chunked sums' rounding
    # (1e-13) into 1e-7 differences (the square root is not Lipschitz at zero).
    model = make_botorch_model(num_outputs=2, n=100, num_features=32)
    model.eval()
    test_x = torch.rand(6, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64).unsqueeze(-3)
    values = []
    for chunk_rows in (False, 9):
        torch.manual_seed(5)
        with torch.no_grad(), gprf.settings.feature_chunk_size(chunk_rows):
            values.append(draw_matheron_paths(model, torch.Size([3]))(test_x))
    torch.testing.assert_close(values[0], values[1], rtol=0, atol=1e-10)


def test_the_update_from_unfactored_sums_is_the_update():
    """What sharded sampling composes (sums added up elsewhere, then factored) gives the update of the factored root
    for the same random draws."""
    model = make_botorch_model(num_outputs=2, n=100, num_features=32)
    prior_weights = torch.randn(3, 2, 32, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    with torch.no_grad():
        root, residuals = training_root(model)
        torch.manual_seed(7)
        expected = feature_space_update_weights(root, residuals, prior_weights)
        gram, projection = root.sums(residuals.unsqueeze(-1))
        torch.manual_seed(7)
        standard = update_normals(gram, prior_weights)
        weights = capacitance_update_weights(
            CapacitanceFactor.from_gram(gram), gram, projection, prior_weights, standard
        )
    assert standard.shape == (2, 32, 3) and weights.shape == prior_weights.shape
    torch.testing.assert_close(weights, expected, rtol=0, atol=1e-10)


def test_non_gaussian_likelihoods_keep_botorchs_route():
    model = make_botorch_model()
    model.eval()
    model.likelihood = BernoulliLikelihood()
    with (
        mock.patch.object(gprf_dispatch, "weight_space_matheron_paths") as ours,
        mock.patch.object(gprf_dispatch, "botorch_matheron_paths") as theirs,
    ):
        draw_matheron_paths(model, torch.Size([2]))
    assert ours.call_count == 0 and theirs.call_count == 1


@pytest.mark.parametrize("draw", [weight_space_matheron_paths, draw_matheron_paths])
def test_candidates_of_another_width_are_refused_by_name(draw):
    # Without an input transform (BoTorch's Normalize would name the widths first).
    x = torch.rand(20, 3, dtype=torch.float64)
    model = RandomFeatureSingleTaskGP(x, x.sum(-1, keepdim=True), num_features=16, seed=0).eval()
    paths = draw(model, torch.Size([2]))
    with pytest.raises(ValueError, match=r"points of shape \(\.\.\., n, 3\).*got \(5, 4\)"):
        paths(torch.rand(5, 4, dtype=torch.float64))


@pytest.mark.parametrize("botorch_route", [False, True])
@pytest.mark.parametrize("num_outputs", [1, 2])
def test_paths_of_a_fantasy_model_follow_each_fantasys_posterior(num_outputs, botorch_route):
    # The fantasies add a batch dimension to the training data that the kernel does not have: the update weights
    # (one solve per fantasy) failed to broadcast against the prior weights ("expanded size"), and BoTorch's route
    # failed to evaluate the prior paths at the batched training inputs.
    kwargs = {"update_strategy": lambda **update: gaussian_update(**update)} if botorch_route else {}
    model = make_botorch_model(num_outputs=num_outputs, n=30, num_features=32).eval()
    new_x = torch.rand(2, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    fantasy = model.fantasize(new_x, SobolQMCNormalSampler(torch.Size([3]), seed=0))
    test_x = torch.rand(5, 3, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    posterior = fantasy.posterior(test_x)
    mean, variance = posterior.mean.detach(), posterior.variance.detach()  # fantasies x M x m
    torch.manual_seed(0)
    with torch.no_grad():
        paths = draw_matheron_paths(fantasy, torch.Size([NUM_PATHS]), **kwargs)
        samples = paths(test_x) if num_outputs == 1 else paths(test_x.unsqueeze(-3))  # S x fantasies x [m x] M
    samples = samples.reshape(NUM_PATHS, 3, num_outputs, 5).transpose(-1, -2)
    assert_gaussian_moments(samples, mean, variance, Z_BOUND)


def _gpytorch_spelling(name: str):
    """``ScaleKernel(k1) + ScaleKernel(k2)`` or ``ScaleKernel(k1) * k2`` (GPyTorch's AdditiveKernel and ProductKernel of
    gprf kernels), and gprf's spelling of the same covariance (the same parts and outputscales)."""
    first = ScaleKernel(RandomFourierKernel(32, num_dims=3, ard_num_dims=3, seed=0)).double()
    second = RandomFourierKernel(32, num_dims=3, kernel="matern52", seed=1).double()
    first.outputscale = 1.5
    if name == "sum":
        scaled_second = ScaleKernel(second).double()
        return first + scaled_second, FeatureSumKernel(first, scaled_second)
    native = ScaleKernel(first.base_kernel * second).double()
    native.raw_outputscale = first.raw_outputscale
    return first * second, native


@pytest.mark.filterwarnings("ignore::gprf.exceptions.DispatchFallbackWarning")  # the product's predictions, not paths
@pytest.mark.parametrize("name", ["sum", "product"])
def test_paths_of_gpytorch_sums_and_products_follow_the_feature_model(name):
    # GPyTorch's own algebra of gprf kernels evaluates to the feature root of gprf's spelling: a plain SingleTaskGP
    # with it draws its paths in weight space, distributed as the feature model's posterior.
    ours, native = _gpytorch_spelling(name)
    # More points than columns (64): see test_chunked_roots_give_the_same_paths.
    x = 2 * torch.rand(100, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64) - 1
    y = torch.sin(3 * x).sum(-1, keepdim=True)
    models = [SingleTaskGP(x, y, covar_module=ours), RandomFeatureSingleTaskGP(x, y, covar_module=native)]
    models[1].likelihood.noise_covar.raw_noise = models[0].likelihood.noise_covar.raw_noise
    models[1].mean_module.raw_constant = models[0].mean_module.raw_constant
    for model in models:
        model.eval()
    test_x = 2 * torch.rand(5, 3, generator=torch.Generator().manual_seed(3), dtype=torch.float64) - 1
    _assert_weight_space_paths_follow(models[0], models[1], test_x)
    # Chunked roots (every part lazy, the sum or product too) give the same paths.
    values = []
    for chunk_rows in (False, 9):
        torch.manual_seed(5)
        with torch.no_grad(), gprf.settings.feature_chunk_size(chunk_rows):
            values.append(draw_matheron_paths(models[0], torch.Size([3]))(test_x))
    torch.testing.assert_close(values[0], values[1], rtol=0, atol=1e-10)
