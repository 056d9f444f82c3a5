"""gprf.botorch.multitask and BoTorch's MultiTaskGP with a gprf data kernel: ``covar_module * PositiveIndexKernel``
becomes the exact Kronecker root of the ICM kernel, the marginal likelihood and the posterior stay in feature space
with per-task noise, fitting reduces the loss, and the posterior is the Gaussian posterior of the feature model with
that noise; Matheron paths drawn in weight space follow that posterior for every task (per-task means and noise, float32
and float64), Thompson sampling over candidates with a task column works, candidates of another width are refused by
name, and every MultiTaskGP without a gprf covariance goes to BoTorch's handler. A ScaleKernel around the data kernel
(GPyTorch's ProductKernel with the task kernel) keeps the feature root: it fits, predicts and samples alike."""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from botorch.acquisition.thompson_sampling import PathwiseThompsonSampling
from botorch.fit import fit_gpytorch_mll
from botorch.models import MultiTaskGP
from botorch.sampling.pathwise import draw_matheron_paths
from gpytorch.kernels import ProductKernel, ScaleKernel
from gpytorch.likelihoods import HadamardGaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood

import gprf.botorch.dispatch as gprf_dispatch
from gprf.botorch import multitask_matheron_paths
from gprf.kernels import FeatureProductKernel, IndexRootKernel, RandomFourierKernel, root_columns
from gprf.linalg import FeatureRootAddedDiagLinearOperator
from tests.botorch.conftest import assert_gradient_matches_finite_differences
from tests.helpers.gaussian_samples import assert_gaussian_moments

pytestmark = pytest.mark.botorch


def _data(n: int = 40, num_tasks: int = 3, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, generator=generator, dtype=torch.float64)
    tasks = torch.arange(n).remainder(num_tasks).double().unsqueeze(-1)
    y = torch.sin(4 * x[:, :1]) * (1 + 0.3 * tasks) + 0.05 * torch.randn(n, 1, generator=generator, dtype=torch.float64)
    return torch.cat([x, tasks], -1), y


def _model(rank: int = 2, num_features: int = 64, dtype: torch.dtype = torch.float64, **kwargs) -> MultiTaskGP:
    train_x, train_y = (t.to(dtype) for t in _data())
    data_kernel = RandomFourierKernel(num_features, num_dims=2, ard_num_dims=2, seed=0).to(dtype)
    return MultiTaskGP(train_x, train_y, task_feature=-1, covar_module=data_kernel, rank=rank, **kwargs)


def _sampling_model(dtype: torch.dtype = torch.float64, **kwargs) -> MultiTaskGP:
    """A MultiTaskGP in eval mode with distinct per-task means and noise levels (so that a path that ignored either
    would miss the posterior by many standard errors)."""
    model = _model(num_features=32, dtype=dtype, **kwargs)
    with torch.no_grad():
        for task, mean in enumerate(model.mean_module.base_means):
            mean.constant.fill_(0.5 * task - 0.3)
        model.likelihood.noise = torch.tensor([0.01, 0.05, 0.2], dtype=dtype)
    return model.eval()


def _task_points(m: int = 4, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``m`` points repeated for tasks 0, 1, 2, with the task column last (``3m x 3``)."""
    x = torch.rand(m, 2, generator=torch.Generator().manual_seed(3), dtype=dtype)
    tasks = torch.arange(3).repeat_interleave(m).to(dtype).unsqueeze(-1)
    return torch.cat([x.repeat(3, 1), tasks], -1)


def _assert_fit_reduces_the_loss(model: MultiTaskGP, mll: ExactMarginalLogLikelihood, train_x: torch.Tensor) -> None:
    with torch.no_grad():
        before = -mll(model(train_x), model.train_targets, [train_x]).item()
    fit_gpytorch_mll(mll, optimizer_kwargs={"options": {"maxiter": 30}})
    model.train()
    with torch.no_grad():
        after = -mll(model(train_x), model.train_targets, [train_x]).item()
    assert after < before


def _assert_posterior_is_the_dense_gaussian_posterior(
    model: MultiTaskGP, train_x: torch.Tensor, test_x: torch.Tensor
) -> None:
    with torch.no_grad():
        prediction = model(test_x)
        # The dense Gaussian posterior of the same covariance, per-task noise and per-task mean.
        kernel, y = model.covar_module, model.train_targets
        noise = model.likelihood.noise.squeeze()[train_x[:, -1].long()]
        task_means = torch.stack([mean.constant for mean in model.mean_module.base_means]).squeeze(-1)
        train_mean, test_mean = task_means[train_x[:, -1].long()], task_means[test_x[:, -1].long()]
        k_train = kernel(train_x).to_dense() + torch.diag(noise)
        k_cross = kernel(test_x, train_x).to_dense()
        mean = test_mean + k_cross @ torch.linalg.solve(k_train, y - train_mean)
        covariance = kernel(test_x).to_dense() - k_cross @ torch.linalg.solve(k_train, k_cross.mT)
    torch.testing.assert_close(prediction.mean, mean, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(prediction.covariance_matrix, covariance, rtol=1e-6, atol=1e-6)


def test_multitask_gp_builds_the_icm_root_and_keeps_feature_space():
    model = _model()
    kernel = model.covar_module
    assert isinstance(kernel, FeatureProductKernel) and kernel.method == "kronecker"
    assert isinstance(kernel.kernels[1], IndexRootKernel) and kernel.root_dim == 64 * (2 + 3)
    assert isinstance(model.likelihood, HadamardGaussianLikelihood)
    # The tied task kernel is BoTorch's own module: its prior and parameters are the model's.
    assert kernel.kernels[1].index_kernel.__class__.__name__ == "PositiveIndexKernel"
    model.train()
    (train_x,) = model.train_inputs
    covariance = model.likelihood(model(train_x), [train_x]).lazy_covariance_matrix.evaluate_kernel()
    assert isinstance(covariance, FeatureRootAddedDiagLinearOperator)


def test_fit_reduces_the_loss_and_posterior_is_the_feature_model_posterior():
    model = _model()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    (train_x,) = model.train_inputs
    model.train()
    _assert_fit_reduces_the_loss(model, mll, train_x)
    model.eval()
    test_x = torch.cat([torch.rand(6, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)] * 1, 0)
    test_x = torch.cat([test_x, torch.tensor([[0.0], [1.0], [2.0]] * 2, dtype=torch.float64)], -1)
    _assert_posterior_is_the_dense_gaussian_posterior(model, train_x, test_x)


NUM_PATHS = 4000
Z_BOUND = 4.5  # two-sided, over a few dozen z-scores per test


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_matheron_paths_follow_the_posterior_of_every_task(dtype):
    model = _sampling_model(dtype)
    test_x = _task_points(dtype=dtype)
    posterior = model.posterior(test_x)
    mean, variance = (t.detach().squeeze(-1).double() for t in (posterior.mean, posterior.variance))
    torch.manual_seed(0)
    with torch.no_grad():
        samples = draw_matheron_paths(model, torch.Size([NUM_PATHS]))(test_x)  # S x 3m
    assert samples.shape == (NUM_PATHS, test_x.size(0)) and samples.dtype == dtype
    samples = samples.double()
    assert_gaussian_moments(samples, mean, variance, Z_BOUND)


def test_paths_of_a_multitask_gp_are_drawn_in_weight_space():
    model = _sampling_model()
    with mock.patch.object(gprf_dispatch, "botorch_multitask_matheron_paths") as theirs:
        paths = draw_matheron_paths(model, torch.Size([3]))
    assert theirs.call_count == 0
    assert paths(_task_points()).shape == (3, 12)
    # The update weights live in the root's F (r + T) columns: nothing of size N was kept.
    assert paths["update_paths"].weight.shape == (3, 32 * (2 + 3))


def test_thompson_sampling_over_candidates_with_a_task_column():
    model = _sampling_model(output_tasks=[0])
    acquisition = PathwiseThompsonSampling(model)
    generator = torch.Generator().manual_seed(7)
    candidates = torch.rand(64, 1, 2, generator=generator, dtype=torch.float64)
    candidates = torch.cat([candidates, torch.zeros(64, 1, 1, dtype=torch.float64)], -1)  # the target task, 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)  # the path is drawn from the global RNG at the first evaluation
        values = acquisition(candidates)
    assert values.shape == (64,) and bool(torch.isfinite(values).all())
    best = candidates[values.argmax()]
    # The value is the path at the candidate on the outcome scale: the same path evaluated directly.
    with torch.no_grad():
        direct = acquisition.samples(candidates.squeeze(-2)).squeeze(-1).squeeze(0)
    torch.testing.assert_close(values.detach(), direct, rtol=1e-12, atol=1e-12)
    assert best.shape == (1, 3) and best[0, -1] == 0
    # Gradients reach the continuous columns (what optimize_acqf follows); task 0 +- 1e-6 stays task 0.
    assert_gradient_matches_finite_differences(acquisition, candidates[:2])


def test_candidates_of_another_width_are_refused_by_name():
    paths = draw_matheron_paths(_sampling_model(), torch.Size([2]))
    with pytest.raises(ValueError, match=r"points of shape \(\.\.\., n, 3\).*task column included; got \(5, 2\)"):
        paths(torch.rand(5, 2, dtype=torch.float64))


def test_train_mode_is_refused_with_the_fix():
    model = _sampling_model().train()
    with pytest.raises(RuntimeError, match=r"call model.eval\(\)"):
        multitask_matheron_paths(model, torch.Size([2]))


def test_other_multitask_models_go_to_botorchs_handler_unchanged():
    train_x, train_y = _data()
    exact = MultiTaskGP(train_x, train_y, task_feature=-1).eval()
    with (
        mock.patch.object(gprf_dispatch, "multitask_matheron_paths") as ours,
        mock.patch.object(
            gprf_dispatch, "botorch_multitask_matheron_paths", wraps=gprf_dispatch.botorch_multitask_matheron_paths
        ) as theirs,
        # BoTorch 0.18.1 itself fails here: it has no feature generator for the ProductKernel of an exact data
        # kernel and the task kernel (and with one, its prior sampler would add the MultitaskMean, one column per
        # task, to the path values at the N training points).
        pytest.raises(NotImplementedError, match="Could not find signature for gen_kernel_features"),
    ):
        draw_matheron_paths(exact, torch.Size([2]))
    assert ours.call_count == 0 and theirs.call_count == 1
    # A caller-chosen prior sampler also goes there, with its arguments as given.
    model = _sampling_model()
    with mock.patch.object(gprf_dispatch, "botorch_multitask_matheron_paths") as theirs:
        sampler = mock.Mock()
        draw_matheron_paths(model, torch.Size([2]), prior_sampler=sampler)
    theirs.assert_called_once()
    assert theirs.call_args.kwargs["prior_sampler"] is sampler


def test_a_non_feature_covariance_is_refused_by_name():
    train_x, train_y = _data()
    with pytest.raises(TypeError, match="covar_module is a gprf feature kernel"):
        multitask_matheron_paths(MultiTaskGP(train_x, train_y, task_feature=-1).eval(), torch.Size([2]))


def test_a_scaled_data_kernel_fits_predicts_and_samples_in_feature_space():
    # MultiTaskGP multiplies ScaleKernel(gprf kernel) by its task kernel with GPyTorch's ProductKernel: the data root
    # times the task covariance's exact root, the same ICM covariance as the bare kernel's (F T columns).
    train_x, train_y = _data()
    data_kernel = ScaleKernel(RandomFourierKernel(32, num_dims=2, ard_num_dims=2, seed=0).double()).double()
    model = MultiTaskGP(train_x, train_y, task_feature=-1, covar_module=data_kernel, rank=2)
    assert isinstance(model.covar_module, ProductKernel) and root_columns(model.covar_module) == 32 * 3
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    model.train()
    covariance = model.likelihood(model(train_x), [train_x]).lazy_covariance_matrix.evaluate_kernel()
    assert isinstance(covariance, FeatureRootAddedDiagLinearOperator)
    _assert_fit_reduces_the_loss(model, mll, train_x)
    with torch.no_grad():
        for task, mean in enumerate(model.mean_module.base_means):
            mean.constant.fill_(0.5 * task - 0.3)
        model.likelihood.noise = torch.tensor([0.01, 0.05, 0.2], dtype=torch.float64)
    model.eval()
    test_x = _task_points()
    _assert_posterior_is_the_dense_gaussian_posterior(model, train_x, test_x)
    posterior = model.posterior(test_x)
    mean, variance = (t.detach().squeeze(-1) for t in (posterior.mean, posterior.variance))
    torch.manual_seed(0)
    with torch.no_grad(), mock.patch.object(gprf_dispatch, "botorch_multitask_matheron_paths") as theirs:
        samples = draw_matheron_paths(model, torch.Size([NUM_PATHS]))(test_x)  # S x 3m
    assert theirs.call_count == 0
    assert_gaussian_moments(samples, mean, variance, Z_BOUND)
