"""BoTorch's MultiTaskGP with a gprf data kernel: ``covar_module * PositiveIndexKernel`` becomes the exact Kronecker
root of the ICM kernel, the marginal likelihood and the posterior stay in feature space with per-task noise, fitting
reduces the loss, and the posterior is the Gaussian posterior of the feature model with that noise."""

from __future__ import annotations

import pytest
import torch
from botorch.fit import fit_gpytorch_mll
from botorch.models import MultiTaskGP
from gpytorch.likelihoods import HadamardGaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood

from gprf.kernels import FeatureProductKernel, IndexRootKernel, RandomFourierKernel
from gprf.linalg import FeatureRootAddedDiagLinearOperator

pytestmark = pytest.mark.botorch


def _data(n: int = 40, num_tasks: int = 3, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, generator=generator, dtype=torch.float64)
    tasks = torch.arange(n).remainder(num_tasks).double().unsqueeze(-1)
    y = torch.sin(4 * x[:, :1]) * (1 + 0.3 * tasks) + 0.05 * torch.randn(n, 1, generator=generator, dtype=torch.float64)
    return torch.cat([x, tasks], -1), y


def _model(rank: int = 2) -> MultiTaskGP:
    train_x, train_y = _data()
    data_kernel = RandomFourierKernel(64, num_dims=2, ard_num_dims=2, seed=0)
    return MultiTaskGP(train_x, train_y, task_feature=-1, covar_module=data_kernel, rank=rank)


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
    with torch.no_grad():
        before = -mll(model(train_x), model.train_targets, [train_x]).item()
    fit_gpytorch_mll(mll, optimizer_kwargs={"options": {"maxiter": 30}})
    model.train()
    with torch.no_grad():
        after = -mll(model(train_x), model.train_targets, [train_x]).item()
    assert after < before
    model.eval()
    test_x = torch.cat([torch.rand(6, 2, generator=torch.Generator().manual_seed(4), dtype=torch.float64)] * 1, 0)
    test_x = torch.cat([test_x, torch.tensor([[0.0], [1.0], [2.0]] * 2, dtype=torch.float64)], -1)
    with torch.no_grad():
        prediction = model(test_x)
        # The dense Gaussian posterior of the same (approximate) kernel, per-task noise and per-task mean.
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
