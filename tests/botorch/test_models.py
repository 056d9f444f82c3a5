"""gprf.botorch.models: RandomFeatureSingleTaskGP (and a plain SingleTaskGP with a gprf kernel) through BoTorch's model
API — posteriors equal to the dense GP formulas, acquisition optimization whose result is re-evaluated and compared
with its starts, fantasies and conditioning equal to refits, subset_output, state_dict, pickling, output batch
dimensions, and refused kernels."""

from __future__ import annotations

import pickle
import warnings
from unittest import mock

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

import gprf
from gprf.botorch import RandomFeatureSingleTaskGP
from gprf.botorch.models import output_batch_dims
from gprf.exceptions import LowRankStructureWarning, OversizedFeaturesWarning
from gprf.features import Skeleton
from gprf.kernels import (
    AdditiveFeatureKernel,
    ArcCosineQuadratureKernel,
    CompositionalRandomFeatureKernel,
    FeatureProductKernel,
    FeatureSumKernel,
    LinearFeatureKernel,
    LocalizedMaclaurinKernel,
    MaclaurinKernel,
    OffsetPolynomialSketchKernel,
    PolynomialSketchKernel,
    QuadratureKernel,
    RandomFourierKernel,
)
from gprf.linalg import factor_points, feature_root_added_diag_operator
from gprf.prediction import FeatureSpacePredictionStrategy
from gprf.sizing import RefitMonitor, suggest_num_features
from tests.botorch.conftest import (
    COMPOSITE_DIMS,
    COMPOSITES,
    assert_gradient_matches_finite_differences,
    dense_posterior,
    make_botorch_model,
    make_composite_model,
    optimize_from_fixed_starts,
)

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


def test_default_number_of_features_follows_the_rule_on_the_transformed_inputs():
    from botorch.models.transforms.input import FilterFeatures

    generator = torch.Generator().manual_seed(0)
    for n, d, selected, expected in ((40, 6, None, 192), (150, 6, None, 300), (150, 6, [0, 2], 128)):
        x = torch.rand(n, d, generator=generator, dtype=torch.float64)
        transform = None if selected is None else FilterFeatures(feature_indices=torch.tensor(selected))
        model = RandomFeatureSingleTaskGP(x, x.sum(-1, keepdim=True), input_transform=transform)
        assert model.covar_module.root_dim == expected == suggest_num_features(n, len(selected or range(d)))
    with pytest.raises(ValueError, match="num_features must be a positive integer or 'auto', got 'many'"):
        RandomFeatureSingleTaskGP(x, x.sum(-1, keepdim=True), num_features="many")
    with pytest.raises(ValueError, match="num_features must be a positive integer, got 0"):
        RandomFeatureSingleTaskGP(x, x.sum(-1, keepdim=True), num_features=0)


@pytest.mark.parametrize("plain", [False, True])
def test_refitting_oversized_models_warns_once(plain):
    from botorch.models.utils.gpytorch_modules import get_covar_module_with_dim_scaled_prior

    from gprf import random_features

    x = torch.rand(20, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = torch.sin(5 * x).sum(-1, keepdim=True)

    def model_on(n: int, num_features: int | str):
        if not plain:
            return RandomFeatureSingleTaskGP(x[:n], y[:n], num_features=num_features, seed=0)
        size = suggest_num_features(n, 3) if num_features == "auto" else num_features
        kernel = random_features(get_covar_module_with_dim_scaled_prior(ard_num_dims=3), size, seed=0).double()
        return SingleTaskGP(x[:n], y[:n], covar_module=kernel)

    monitor = RefitMonitor()  # a fresh count, whatever other tests fitted
    options = {"optimizer_kwargs": {"options": {"maxiter": 2}}}
    with mock.patch("gprf.kernels.feature_kernel.REFIT_MONITOR", monitor), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sized = model_on(20, "auto")  # the rule's size never counts
        fit_gpytorch_mll(ExactMarginalLogLikelihood(sized.likelihood, sized), **options)
        for n in (18, 19, 20):  # a loop: a new model on more points at every iteration, 512 features each time
            model = model_on(n, 512)
            fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model), **options)
    oversized = [item for item in w if issubclass(item.category, OversizedFeaturesWarning)]
    assert len(oversized) == 1 and "A second model with 512 random features on 19 points" in str(oversized[0].message)


def test_transformed_input_dimension_sizes_the_kernel():
    from botorch.models.transforms.input import FilterFeatures

    generator = torch.Generator().manual_seed(0)
    x = torch.rand(10, 4, generator=generator, dtype=torch.float64)
    y = torch.sin(3 * x).sum(-1, keepdim=True)
    selected = FilterFeatures(feature_indices=torch.tensor([0, 2]))
    model = RandomFeatureSingleTaskGP(x, y, num_features=16, input_transform=selected, seed=0)
    kernel = model.covar_module
    assert kernel.feature_map.input_dim == 2 and kernel.lengthscale.shape == (1, 2)
    model.eval()
    test_x = torch.rand(3, 4, generator=generator, dtype=torch.float64)
    posterior = model.posterior(test_x)
    # The finite model of columns 0 and 2 in weight space: w ~ N(0, I), f = R(x[:, [0, 2]]) w, targets standardized.
    with torch.no_grad():
        root, test_root = kernel.features(x[:, [0, 2]]), kernel.features(test_x[:, [0, 2]])
        noise, constant = model.likelihood.noise, model.mean_module.constant
        capacitance = torch.eye(16, dtype=torch.float64) + root.mT @ root / noise
        weights = torch.linalg.solve(capacitance, root.mT @ (model.train_targets - constant) / noise)
        mean = constant + test_root @ weights
        variance = (test_root * torch.linalg.solve(capacitance, test_root.mT).mT).sum(-1)
        mean, variance = model.outcome_transform.untransform(mean.unsqueeze(-1), variance.unsqueeze(-1))
    torch.testing.assert_close(posterior.mean, mean, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(posterior.variance, variance, rtol=1e-10, atol=1e-10)
    # The dropped columns do not matter.
    moved = test_x.clone()
    moved[:, [1, 3]] += 0.5
    torch.testing.assert_close(model.posterior(moved).mean, posterior.mean, rtol=0, atol=0)


@pytest.mark.parametrize("num_outputs", [1, 2])
def test_fit_posterior_and_acquisition(num_outputs, device):
    model = make_botorch_model(num_outputs=num_outputs, device=device)
    _fit(model)
    test_x = _test_points(device=device)
    posterior = model.posterior(test_x)
    assert isinstance(model.prediction_strategy, FeatureSpacePredictionStrategy)
    # Woodbury in feature space against N x N solves, both in float64: they agree far below 1e-8.
    mean, variance = dense_posterior(model, test_x)
    torch.testing.assert_close(posterior.mean.detach(), mean, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(posterior.variance.detach(), variance, rtol=1e-8, atol=1e-8)

    bounds = torch.tensor([[-1.0] * 3, [1.0] * 3], dtype=torch.float64, device=device)
    objective = None
    if num_outputs > 1:
        from botorch.acquisition.objective import LinearMCObjective

        objective = LinearMCObjective(torch.tensor([1.0, -0.5], dtype=torch.float64, device=device))
    acquisition = qLogNoisyExpectedImprovement(
        model,
        X_baseline=model.train_inputs[0][..., 0, :, :] if num_outputs > 1 else model.train_inputs[0],
        sampler=SobolQMCNormalSampler(torch.Size([32]), seed=0),
        objective=objective,
        prune_baseline=False,
    )
    candidates, value, starts = optimize_from_fixed_starts(acquisition, bounds, q=2)
    assert candidates.shape == (2, 3) and bool(((candidates >= -1) & (candidates <= 1)).all())
    with torch.no_grad():
        # The returned value is the acquisition at the returned candidates (fixed base samples: deterministic).
        torch.testing.assert_close(acquisition(candidates.unsqueeze(0)).squeeze(0), value, rtol=1e-12, atol=1e-12)
    # What L-BFGS-B follows: exact gradients through the feature-space posterior. (Whether it ends above its best
    # start is not a property of L-BFGS-B: a line search that stops abnormally returns its last trial point.)
    assert_gradient_matches_finite_differences(acquisition, starts)


def test_knowledge_gradient_uses_feature_space_fantasies():
    model = make_botorch_model()
    _fit(model)
    acquisition = qKnowledgeGradient(model, num_fantasies=4)
    bounds = torch.tensor([[-1.0] * 3, [1.0] * 3], dtype=torch.float64)
    options = {"maxiter": 5, "seed": 0}  # the seed of the initial conditions
    candidates, value = optimize_acqf(acquisition, bounds, q=1, num_restarts=2, raw_samples=16, options=options)
    assert candidates.shape == (1, 3) and bool(((candidates >= -1) & (candidates <= 1)).all()) and torch.isfinite(value)
    fantasy = model.fantasize(candidates, sampler=SobolQMCNormalSampler(torch.Size([4]), seed=0))
    test_x = _test_points()
    fantasy_posterior = fantasy.posterior(test_x)
    assert isinstance(fantasy.prediction_strategy, FeatureSpacePredictionStrategy)
    # Each fantasy is the model conditioned on its fantasized observation: the same finite model refitted on the
    # training data plus that point (state copied, targets in the model's standardized space).
    full_x = torch.cat([model.train_inputs[0], model.transform_inputs(candidates)], -2)
    fantasized = fantasy.train_targets[..., -1]
    assert fantasized.shape == (4,) and fantasized.unique().numel() == 4
    reference = make_botorch_model()
    reference.load_state_dict(model.state_dict())
    reference.eval()
    for j in range(4):
        reference.set_train_data(full_x, torch.cat([model.train_targets, fantasized[j : j + 1]]), strict=False)
        expected = reference.posterior(test_x)
        torch.testing.assert_close(fantasy_posterior.mean[j], expected.mean, rtol=0, atol=1e-8)
        torch.testing.assert_close(fantasy_posterior.variance[j], expected.variance, rtol=0, atol=1e-8)


@pytest.mark.parametrize("plain", [False, True])
def test_both_routes_give_the_same_acquisition_values_and_gradients(plain):
    # 40 points, 64 features: qLogNEI's joint posterior at 8 baseline points and q = 2 candidates, and qKG's fantasy
    # posteriors, by the N x N and the F x F routes. (At all 40 training points as baseline, the joint posterior
    # covariance is so ill-conditioned that BoTorch's Cholesky factor amplifies rounding to 1e-6 either way.)
    results = {}
    for route in ("points", "features"):
        model = make_botorch_model()
        if plain:
            model = SingleTaskGP(
                *model.train_inputs, model.train_targets.unsqueeze(-1), covar_module=model.covar_module
            )
        model.eval()
        starts = 2 * torch.rand(3, 2, 3, generator=torch.Generator().manual_seed(12), dtype=torch.float64) - 1
        spy = mock.patch("gprf.prediction.feature_space.factor_points", wraps=factor_points)
        with gprf.settings.covariance_route(route), spy as points_factorisations:
            acquisitions = {  # built in the block: qLogNEI caches the baseline posterior's Cholesky factor
                "qlognei": qLogNoisyExpectedImprovement(
                    model,
                    X_baseline=model.train_inputs[0][:8],  # well-conditioned joint covariance
                    sampler=SobolQMCNormalSampler(torch.Size([32]), seed=0),
                    prune_baseline=False,  # pruning draws from the global generator
                ),
                "qkg": qKnowledgeGradient(
                    model, num_fantasies=4, sampler=SobolQMCNormalSampler(torch.Size([4]), seed=1)
                ),
            }
            for name, acquisition in acquisitions.items():
                points = starts
                if name == "qkg":  # the candidates and one point per fantasy (q + num_fantasies rows)
                    points = torch.cat([starts, starts[:, :1].expand(3, 4, 3) * 0.5], -2)
                points = points.clone().requires_grad_(True)
                value = acquisition(points)
                (gradient,) = torch.autograd.grad(value.sum(), points)
                results[route, name] = (value.detach(), gradient)
        assert points_factorisations.called == (route == "points")
    for name in ("qlognei", "qkg"):
        for points, features in zip(results["points", name], results["features", name], strict=True):
            torch.testing.assert_close(points, features, rtol=0, atol=1e-8)


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
    train_x = model.train_inputs[0]
    full_x = torch.cat([train_x, model.transform_inputs(new_x).expand(*train_x.shape[:-2], 3, 3)], -2)
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


def _batched_kernel(family: str, batch_shape: torch.Size) -> ScaleKernel:
    """``ScaleKernel`` of a gprf kernel of ``family`` with ``batch_shape`` (independent draws per output), 3 inputs."""
    kwargs = {"seed": 0, "batch_shape": batch_shape}
    builders = {
        "rff": lambda: RandomFourierKernel(16, num_dims=3, **kwargs),
        "maclaurin": lambda: MaclaurinKernel(33, num_dims=3, **kwargs),
        "maclaurin-gaussian": lambda: MaclaurinKernel(33, num_dims=3, kernel="gaussian", **kwargs),
        "localized-maclaurin": lambda: LocalizedMaclaurinKernel(33, num_dims=3, **kwargs),
        "polynomial-sketch": lambda: PolynomialSketchKernel(16, num_dims=3, **kwargs),
        "offset-polynomial-sketch": lambda: OffsetPolynomialSketchKernel(16, num_dims=3, **kwargs),
        "quadrature": lambda: QuadratureKernel(2, num_dims=3, **kwargs),
        "arc-cosine-quadrature": lambda: ArcCosineQuadratureKernel(2, num_dims=3, **kwargs),
        "compositional": lambda: CompositionalRandomFeatureKernel(
            Skeleton.fully_connected(3, 2, "exponential"), 16, **kwargs
        ),
        "additive": lambda: AdditiveFeatureKernel(4, num_dims=3, order=2, **kwargs),
        "linear": lambda: LinearFeatureKernel(num_dims=3, batch_shape=batch_shape),
        "sum": lambda: FeatureSumKernel(
            RandomFourierKernel(8, num_dims=3, **kwargs),
            MaclaurinKernel(9, num_dims=3, **kwargs),
            batch_shape=batch_shape,
        ),
        "product-permutation": lambda: FeatureProductKernel(
            RandomFourierKernel(8, num_dims=3, **kwargs),
            PolynomialSketchKernel(8, num_dims=3, **kwargs),
            num_features=16,
            method="permutation",
            seed=1,
        ),
    }
    return ScaleKernel(builders[family](), batch_shape=batch_shape).double()


BATCHED_FAMILIES = (
    "rff",
    "maclaurin",
    "maclaurin-gaussian",
    "localized-maclaurin",
    "polynomial-sketch",
    "offset-polynomial-sketch",
    "quadrature",
    "arc-cosine-quadrature",
    "compositional",
    "additive",
    "linear",
    "sum",
    "product-permutation",
)


# Two outputs, and four: a compositional map's node tables (4 slots here) are shared buffers whose leading size then
# equals the number of outputs, as a Maclaurin map's degree scales and a permutation product's pairing (one row per
# factor) do with two; subsetting them as if they were per-output draws broke the subset model.
@pytest.mark.parametrize("num_outputs", [2, 4])
@pytest.mark.parametrize("family", BATCHED_FAMILIES)
def test_subset_output_works_for_every_kernel_family_with_a_batch_shape(family, num_outputs):
    generator = torch.Generator().manual_seed(0)
    x = 2 * torch.rand(30, 3, generator=generator, dtype=torch.float64) - 1
    y = torch.stack([x.sum(-1), x.prod(-1), torch.sin(3 * x).sum(-1), x.square().sum(-1)], -1)[:, :num_outputs]
    kernel = _batched_kernel(family, torch.Size([num_outputs]))
    model = RandomFeatureSingleTaskGP(x, y, covar_module=kernel, outcome_transform=Standardize(num_outputs)).eval()
    test_x = _test_points()
    full = model.posterior(test_x)
    for keep in ([0], [num_outputs - 1, 0]):
        subset = model.subset_output(keep).eval()
        posterior = subset.posterior(test_x)
        torch.testing.assert_close(posterior.mean, full.mean[..., keep], rtol=0, atol=1e-8)
        torch.testing.assert_close(posterior.variance, full.variance[..., keep], rtol=0, atol=1e-8)


def test_output_batch_dims_leave_shared_buffers_alone():
    model = RandomFeatureSingleTaskGP(
        torch.rand(10, 3, dtype=torch.float64),
        torch.rand(10, 2, dtype=torch.float64),
        covar_module=_batched_kernel("maclaurin", torch.Size([2])),
    )
    dims = model._subset_batch_dict
    prefix = "covar_module.base_kernel.feature_map"
    # Two degrees: the degree scales and the allocation have two entries, like the outputs, but are shared.
    assert model.covar_module.base_kernel.feature_map.degree_scales.shape == (2,)
    assert not {f"{prefix}.degree_scales", f"{prefix}.allocation", f"{prefix}.center"} & set(dims)
    assert dims[f"{prefix}.sketches.0.weights"] == -4 and dims[f"{prefix}.sketches.1.draw_streams"] == -3


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
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    model.train()
    before = mll(model(*model.train_inputs), model.train_targets).item()
    _fit(model)
    model.train()
    assert mll(model(*model.train_inputs), model.train_targets).item() > before
    model.eval()
    test_x = torch.rand(4, 2, generator=generator, dtype=torch.float64)
    posterior = model.posterior(test_x)
    assert isinstance(model.prediction_strategy, FeatureSpacePredictionStrategy)
    mean, variance = dense_posterior(model, test_x)
    torch.testing.assert_close(posterior.mean.detach(), mean, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(posterior.variance.detach(), variance, rtol=1e-8, atol=1e-8)


def _plain_and_gprf_models(num_features: int, n: int = 40):
    """A plain ``SingleTaskGP`` and a ``RandomFeatureSingleTaskGP`` with the same (separate) gprf kernel and data."""
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(n, 3, generator=generator, dtype=torch.float64)
    y = torch.sin(5 * x).sum(-1, keepdim=True)

    def kernel():
        return ScaleKernel(RandomFourierKernel(num_features, num_dims=3, ard_num_dims=3, seed=0)).double()

    return SingleTaskGP(x, y, covar_module=kernel()), RandomFeatureSingleTaskGP(x, y, covar_module=kernel())


def _training_loss(model) -> torch.Tensor:
    """BoTorch's own loss closure (what ``fit_gpytorch_mll`` evaluates)."""
    from botorch.optim.closures import get_loss_closure

    model.train()
    return get_loss_closure(ExactMarginalLogLikelihood(model.likelihood, model))()


def test_plain_single_task_gp_warns_once_per_model_where_its_density_goes_dense():
    # 40 points, 16 features: BoTorch's closure on a plain SingleTaskGP factors the dense 40 x 40 covariance (BoTorch
    # switched linear_operator's fast log_prob off) and says how to keep the O(N F^2) density, once per model.
    for _ in range(2):  # a second model warns again
        plain, _ = _plain_and_gprf_models(num_features=16)
        with pytest.warns(LowRankStructureWarning, match=r"RandomFeatureSingleTaskGP\(train_X, train_Y, covar") as w:
            _training_loss(plain)
            _training_loss(plain)
        assert sum(issubclass(item.category, LowRankStructureWarning) for item in w) == 1


@pytest.mark.parametrize("num_features", [16, 64])
def test_random_feature_single_task_gp_takes_the_structured_density(num_features):
    # The same loss through gprf's MultivariateNormal: no dense matrix (N > F: the features route; N <= F: the points
    # route, which the plain model's dense Cholesky computes too), and the same value as the plain model's.
    plain, model = _plain_and_gprf_models(num_features)
    route = "_dense_terms" if num_features > 40 else "_feature_space_terms"
    spy = mock.patch(
        f"gprf.linalg.feature_root_added_diag_operator.{route}",
        wraps=getattr(feature_root_added_diag_operator, route),
    )
    with warnings.catch_warnings(), spy as terms:
        warnings.simplefilter("error", LowRankStructureWarning)
        loss = _training_loss(model)
    assert terms.call_count == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LowRankStructureWarning)
        torch.testing.assert_close(loss, _training_loss(plain), rtol=0, atol=1e-10)


def test_output_batch_dims_cover_every_batched_parameter_and_draw():
    model = make_botorch_model(num_outputs=2)
    dims = output_batch_dims(model, torch.Size([2]))
    assert dims == model._subset_batch_dict
    tensors = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    for name, dim in dims.items():
        assert tensors[name].size(dim) == 2, name
    assert {"covar_module.raw_lengthscale", "covar_module.feature_map.frequencies", "mean_module.raw_constant"} <= set(
        dims
    )
    assert output_batch_dims(model, torch.Size()) == {}


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


def test_points_of_another_width_are_refused_by_name():
    x = torch.rand(10, 2, dtype=torch.float64)
    model = RandomFeatureSingleTaskGP(x, x.sum(-1, keepdim=True), num_features=16, seed=0).eval()
    with pytest.raises(ValueError, match=r"X must have shape \(\.\.\., q, 2\).*got \(4, 3\)"):
        model.posterior(torch.rand(4, 3, dtype=torch.float64))
    assert model.posterior(torch.rand(4, 2, dtype=torch.float64)).mean.shape == (4, 1)


COMPOSITE_MODELS = pytest.mark.parametrize("plain", [False, True], ids=["RandomFeatureSingleTaskGP", "SingleTaskGP"])


def _composite_points(m: int, seed: int = 11) -> torch.Tensor:
    return 2 * torch.rand(m, COMPOSITE_DIMS, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) - 1


@COMPOSITE_MODELS
@pytest.mark.parametrize("name", COMPOSITES)
def test_log_noisy_expected_improvement_with_composite_kernels(name, plain):
    model = make_composite_model(name, plain=plain).eval()
    test_x = _composite_points(6)
    # The posterior qLogNEI integrates is the dense GP posterior of the same finite kernel (feature-space route).
    posterior = model.posterior(test_x)
    assert isinstance(model.prediction_strategy, FeatureSpacePredictionStrategy)
    mean, variance = dense_posterior(model, test_x)
    torch.testing.assert_close(posterior.mean.detach(), mean, rtol=1e-8, atol=1e-8)
    torch.testing.assert_close(posterior.variance.detach(), variance, rtol=1e-8, atol=1e-8)
    # Four baseline points: over all 30 the joint posterior covariance of the smooth additive kernel (ten features
    # per dimension) has eigenvalues down to 5e-14, and central differences through its Cholesky factor are rounding
    # noise (errors 3e-5 to 2e-3 for steps 1e-5 to 1e-7) whatever the gradient; over four, the smallest is 2e-4.
    acquisition = qLogNoisyExpectedImprovement(
        model,
        X_baseline=model.train_inputs[0][:4],
        sampler=SobolQMCNormalSampler(torch.Size([32]), seed=0),
        prune_baseline=False,
    )
    candidates = test_x.reshape(3, 2, COMPOSITE_DIMS)
    values = acquisition(candidates)
    assert values.shape == (3,) and bool(torch.isfinite(values).all())
    with torch.no_grad():  # fixed base samples: deterministic
        torch.testing.assert_close(acquisition(candidates), values.detach(), rtol=1e-12, atol=1e-12)
    assert_gradient_matches_finite_differences(acquisition, candidates)


def _composite_reference(name: str, plain: bool, model, full_x: torch.Tensor, full_y: torch.Tensor):
    """The same finite model (same draws, state copied) on the augmented data, in the model's transformed space."""
    reference = make_composite_model(name, plain=plain)
    reference.load_state_dict(model.state_dict())
    reference.eval()
    reference.set_train_data(full_x, full_y, strict=False)
    return reference


@COMPOSITE_MODELS
@pytest.mark.parametrize("name", COMPOSITES)
def test_condition_on_observations_with_composite_kernels_equals_refit(name, plain):
    model = make_composite_model(name, plain=plain).eval()
    test_x = _composite_points(4)
    model.posterior(test_x)  # builds the caches the conditioned model updates
    new_x = _composite_points(3, seed=12) * 0.5
    new_y = torch.randn(3, 1, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    conditioned = model.condition_on_observations(new_x, new_y)
    full_x = torch.cat([model.train_inputs[0], model.transform_inputs(new_x)], -2)
    standardized, _ = model.outcome_transform(new_y)
    full_y = torch.cat([model.train_targets, standardized.squeeze(-1)], -1)
    reference = _composite_reference(name, plain, model, full_x, full_y)
    x = model.transform_inputs(test_x)
    torch.testing.assert_close(conditioned(x).mean, reference(x).mean, rtol=0, atol=1e-8)
    torch.testing.assert_close(conditioned(x).variance, reference(x).variance, rtol=0, atol=1e-8)


@COMPOSITE_MODELS
@pytest.mark.parametrize("name", COMPOSITES)
def test_fantasize_with_composite_kernels_equals_refit(name, plain):
    model = make_composite_model(name, plain=plain).eval()
    test_x = _composite_points(4)
    fantasy = model.fantasize(_composite_points(1, seed=13), sampler=SobolQMCNormalSampler(torch.Size([3]), seed=0))
    fantasy_posterior = fantasy.posterior(test_x)
    assert isinstance(fantasy.prediction_strategy, FeatureSpacePredictionStrategy)
    full_x = torch.cat([model.train_inputs[0], model.transform_inputs(_composite_points(1, seed=13))], -2)
    fantasized = fantasy.train_targets[..., -1]
    assert fantasized.shape == (3,) and fantasized.unique().numel() == 3
    for j in range(3):
        full_y = torch.cat([model.train_targets, fantasized[j : j + 1]])
        expected = _composite_reference(name, plain, model, full_x, full_y).posterior(test_x)
        torch.testing.assert_close(fantasy_posterior.mean[j], expected.mean, rtol=0, atol=1e-8)
        torch.testing.assert_close(fantasy_posterior.variance[j], expected.variance, rtol=0, atol=1e-8)
