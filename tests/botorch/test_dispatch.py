"""gprf.botorch.dispatch: gprf's entries in BoTorch's pathwise dispatchers — models with a gprf kernel get prior paths
from the kernel's own features and the weight-space update (posterior paths that reproduce the posterior, Thompson
sampling on them), and every other model is handed to BoTorch unchanged, bit for bit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from unittest import mock

import pytest
import torch
from botorch.acquisition.thompson_sampling import PathwiseThompsonSampling
from botorch.models import MultiTaskGP, SingleTaskGP
from botorch.sampling.pathwise import draw_matheron_paths, gaussian_update
from botorch.sampling.pathwise.features.generators import GenKernelFeatures
from botorch.sampling.pathwise.posterior_samplers import DrawMatheronPaths
from botorch.sampling.pathwise.prior_samplers import DrawKernelFeaturePaths
from botorch.sampling.pathwise.update_strategies import GaussianUpdate
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood
from gpytorch.models import ExactGP

import gprf.botorch.dispatch as gprf_dispatch
from gprf.botorch.features import gen_root_features
from gprf.kernels import FeatureKernel, RandomFourierKernel
from tests.botorch.conftest import (
    COMPOSITE_DIMS,
    COMPOSITES,
    assert_gradient_matches_finite_differences,
    make_botorch_model,
    make_composite_model,
    optimize_from_fixed_starts,
)
from tests.helpers.gaussian_samples import assert_gaussian_moments

pytestmark = pytest.mark.botorch


_EXACT_PATHS = """
    import sys
    if sys.argv[2] == "gprf-first":
        import gprf  # its entries come with BoTorch's import
    import torch
    from botorch.models import SingleTaskGP
    from botorch.sampling.pathwise import draw_matheron_paths
    if sys.argv[2] == "gprf-after-botorch":
        import gprf.botorch  # noqa: F401
    assert ("gprf.botorch" in sys.modules) == (sys.argv[2] != "without-gprf")
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(30, 3, generator=generator, dtype=torch.float64)
    y = torch.stack([torch.sin(5 * x).sum(-1), x.prod(-1)], -1)
    test_x = torch.rand(8, 3, generator=generator, dtype=torch.float64)
    values = []
    for model in (
        SingleTaskGP(x, y[:, :1]),
        SingleTaskGP(x, y),
        SingleTaskGP(x, y[:, :1], train_Yvar=torch.full_like(y[:, :1], 0.01)),
    ):
        model.eval()
        torch.manual_seed(1)
        values.append(
            draw_matheron_paths(model, torch.Size([16]))(test_x.unsqueeze(-3) if model.num_outputs > 1 else test_x)
        )
    torch.save(values, sys.argv[1])
"""


def _results_per_import_mode(tmp_path, script: str, modes: tuple[str, ...]) -> dict[str, list[torch.Tensor]]:
    """Run ``script`` in a fresh interpreter once per import mode and load the tensors each run saved."""
    results = {}
    for mode in modes:
        path = tmp_path / f"{mode}.pt"
        completed = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(script), str(path), mode],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        results[mode] = torch.load(path)
    return results


def test_exact_kernel_models_get_bit_identical_paths_with_and_without_gprf(tmp_path):
    results = _results_per_import_mode(tmp_path, _EXACT_PATHS, ("without-gprf", "gprf-first", "gprf-after-botorch"))
    for mode in ("gprf-first", "gprf-after-botorch"):
        for ours, theirs in zip(results[mode], results["without-gprf"], strict=True):
            assert torch.equal(ours, theirs)


_EXACT_FIT_AND_ACQUISITION = """
    import sys
    if sys.argv[2] == "gprf-first":
        import gprf  # noqa: F401
    import torch
    from botorch.acquisition.logei import qLogNoisyExpectedImprovement
    from botorch.models import SingleTaskGP
    from botorch.optim.closures import get_loss_closure
    from botorch.sampling import SobolQMCNormalSampler
    from gpytorch.mlls import ExactMarginalLogLikelihood
    assert ("gprf.botorch" in sys.modules) == (sys.argv[2] != "without-gprf")
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(30, 3, generator=generator, dtype=torch.float64)
    y = torch.sin(5 * x).sum(-1, keepdim=True)
    candidates = torch.rand(4, 2, 3, generator=generator, dtype=torch.float64).requires_grad_(True)
    model = SingleTaskGP(x, y)
    loss = get_loss_closure(ExactMarginalLogLikelihood(model.likelihood, model))()
    gradients = torch.autograd.grad(loss, list(model.parameters()))
    model.eval()
    posterior = model.posterior(candidates.detach())
    sampler = SobolQMCNormalSampler(torch.Size([32]), seed=0)
    acquisition = qLogNoisyExpectedImprovement(model, X_baseline=x, sampler=sampler, prune_baseline=False)
    value = acquisition(candidates)
    (candidate_gradient,) = torch.autograd.grad(value.sum(), candidates)
    outputs = [loss, *gradients, posterior.mean, posterior.variance, value, candidate_gradient]
    torch.save([t.detach() for t in outputs], sys.argv[1])
"""


def test_exact_models_fit_and_acquire_bit_identically_with_and_without_gprf(tmp_path):
    results = _results_per_import_mode(tmp_path, _EXACT_FIT_AND_ACQUISITION, ("without-gprf", "gprf-first"))
    for ours, theirs in zip(results["gprf-first"], results["without-gprf"], strict=True):
        assert torch.equal(ours, theirs)


def test_gprf_entries_are_the_table_of_the_dispatch_module():
    """Every entry gprf has in BoTorch's dispatchers, and nothing else of gprf's (no route module registers)."""
    table = {
        GenKernelFeatures: {
            (FeatureKernel,): gen_root_features,
            (ScaleKernel,): gprf_dispatch.gen_scale_kernel_features,
        },
        DrawKernelFeaturePaths: {(ExactGP,): gprf_dispatch.draw_prior_paths},
        GaussianUpdate: {
            (ExactGP, GaussianLikelihood): gprf_dispatch.gaussian_update,
            (ExactGP, FixedNoiseGaussianLikelihood): gprf_dispatch.gaussian_update,
        },
        DrawMatheronPaths: {
            (ExactGP,): gprf_dispatch.draw_matheron_paths,
            (MultiTaskGP,): gprf_dispatch.draw_multitask_matheron_paths,
        },
    }
    for dispatcher, entries in table.items():
        ours = {types: func for types, func in dispatcher.funcs.items() if func.__module__.startswith("gprf")}
        assert ours == entries, dispatcher.name


def test_each_entry_holds_botorchs_own_handler():
    # Found before any gprf entry: MultiTaskGP's is BoTorch's ExactGP route, not gprf's ExactGP entry.
    handlers = {
        gprf_dispatch.botorch_scale_kernel_features: "botorch.sampling.pathwise.features.generators",
        gprf_dispatch.botorch_prior_paths: "botorch.sampling.pathwise.prior_samplers",
        gprf_dispatch.botorch_gaussian_update: "botorch.sampling.pathwise.update_strategies",
        gprf_dispatch.botorch_matheron_paths: "botorch.sampling.pathwise.posterior_samplers",
        gprf_dispatch.botorch_multitask_matheron_paths: "botorch.sampling.pathwise.posterior_samplers",
    }
    assert {handler: handler.__module__ for handler in handlers} == handlers
    assert gprf_dispatch.botorch_multitask_matheron_paths is gprf_dispatch.botorch_matheron_paths


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

    assert_gaussian_moments(samples, mean.detach(), posterior.variance.detach(), Z_BOUND)
    # Cross-covariances between test points (first output): se sqrt((s_ii s_jj + s_ij^2) / S).
    first = samples[..., 0] - samples[..., 0].mean(0)
    sample_covariance = first.mT @ first / (NUM_PATHS - 1)
    exact = covariance if num_outputs == 1 else covariance[: test_x.size(0), : test_x.size(0)]
    diag = exact.diagonal()
    standard_error = ((diag.unsqueeze(-1) * diag + exact.square()) / NUM_PATHS).sqrt()
    assert ((sample_covariance - exact) / standard_error).abs().max() < Z_BOUND


def test_gprf_models_draw_matheron_paths_in_weight_space():
    model = make_botorch_model()
    model.eval()
    with (
        mock.patch.object(
            gprf_dispatch, "weight_space_matheron_paths", wraps=gprf_dispatch.weight_space_matheron_paths
        ) as paths,
        mock.patch.object(gprf_dispatch, "weight_space_update", wraps=gprf_dispatch.weight_space_update) as update,
    ):
        draw_matheron_paths(model, torch.Size([3]))
    assert paths.call_count == 1 and update.call_count == 0


def test_a_caller_chosen_update_strategy_takes_botorch_route_and_gprf_update():
    """BoTorch's route evaluates the prior paths at the training inputs and calls the strategy, whose Gaussian
    update dispatches to gprf's weight-space update for gprf kernels."""
    model = make_botorch_model()
    model.eval()
    with (
        mock.patch.object(gprf_dispatch, "weight_space_matheron_paths") as paths,
        mock.patch.object(gprf_dispatch, "weight_space_update", wraps=gprf_dispatch.weight_space_update) as update,
    ):
        draw_matheron_paths(model, torch.Size([3]), update_strategy=lambda **kwargs: gaussian_update(**kwargs))
    assert paths.call_count == 0 and update.call_count == 1


def test_other_models_keep_botorch_update():
    x = torch.rand(20, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    model = SingleTaskGP(x, torch.sin(4 * x).sum(-1, keepdim=True))
    model.eval()
    with (
        mock.patch.object(gprf_dispatch, "weight_space_update") as ours,
        mock.patch.object(
            gprf_dispatch, "botorch_gaussian_update", wraps=gprf_dispatch.botorch_gaussian_update
        ) as theirs,
    ):
        paths = draw_matheron_paths(model, torch.Size([3]))
    assert ours.call_count == 0 and theirs.call_count == 1
    assert paths(x[:4]).shape == (3, 4)


def test_plain_single_task_gp_with_gprf_kernel_samples_paths():
    """Thompson sampling on a plain SingleTaskGP with a gprf kernel: paths are linear in the kernel's own features."""
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(25, 2, generator=generator, dtype=torch.float64)
    kernel = ScaleKernel(RandomFourierKernel(32, num_dims=2, ard_num_dims=2, seed=0))
    model = SingleTaskGP(x, torch.sin(4 * x).sum(-1, keepdim=True), covar_module=kernel)
    model.eval()
    acquisition = PathwiseThompsonSampling(model)
    bounds = torch.tensor([[0.0, 0.0], [1.0, 1.0]], dtype=torch.float64)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # the paths are drawn from the global RNG at the first evaluation
        candidates, value, starts = optimize_from_fixed_starts(acquisition, bounds, q=3, raw_samples=16)
    assert candidates.shape == (3, 2) and bool(((candidates >= 0) & (candidates <= 1)).all())
    with torch.no_grad():
        torch.testing.assert_close(acquisition(candidates.unsqueeze(0)).squeeze(0), value, rtol=1e-12, atol=1e-12)
        # The value is the sum over the q paths of path i at candidate i, and path i is
        # mu + phi(x)^T (w_i + v_i) in the standardized space, with phi the kernel's scaled root, w_i the prior
        # weights and v_i the weight-space update: no features but the kernel's own.
        paths = acquisition.samples._path.paths
        weights = paths["prior_paths"].weight + paths["update_paths"].weight  # (q, F)
        features = kernel.base_kernel.features(candidates) * kernel.outputscale.sqrt()
        standardized = model.mean_module.constant + (features * weights).sum(-1)
        transform = model.outcome_transform
        expected = (transform.means.squeeze() + transform.stdvs.squeeze() * standardized).sum()
    torch.testing.assert_close(value, expected, rtol=1e-10, atol=1e-10)
    assert_gradient_matches_finite_differences(acquisition, starts)  # what L-BFGS-B follows


@pytest.mark.parametrize("plain", [False, True], ids=["RandomFeatureSingleTaskGP", "SingleTaskGP"])
@pytest.mark.parametrize("name", COMPOSITES)
def test_thompson_sampling_with_composite_kernels(name, plain):
    """PathwiseThompsonSampling on products, sums with linear and polynomial parts and additive kernels: the paths
    come from the weight-space route, the value is the paths' (deterministic once drawn) and its gradient is exact."""
    model = make_composite_model(name, plain=plain).eval()
    acquisition = PathwiseThompsonSampling(model)
    starts = 2 * torch.rand(2, 2, COMPOSITE_DIMS, generator=torch.Generator().manual_seed(5), dtype=torch.float64) - 1
    with (
        torch.random.fork_rng(devices=[]),
        mock.patch.object(
            gprf_dispatch, "weight_space_matheron_paths", wraps=gprf_dispatch.weight_space_matheron_paths
        ) as ours,
    ):
        torch.manual_seed(0)  # the paths are drawn from the global RNG at the first evaluation
        values = acquisition(starts)
    assert ours.call_count == 1 and values.shape == (2,) and bool(torch.isfinite(values).all())
    with torch.no_grad():
        # Drawn once: evaluating again gives the same values (what optimize_acqf relies on).
        torch.testing.assert_close(acquisition(starts), values, rtol=0, atol=0)
    assert_gradient_matches_finite_differences(acquisition, starts)  # what L-BFGS-B follows
