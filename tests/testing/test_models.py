"""gprf.testing.models: the plain ExactGP around a kernel, reproducible regression data and the training loop."""

from __future__ import annotations

import gpytorch
import torch

from gprf.kernels import RandomFourierKernel
from gprf.testing import ExactGPModel, regression_data, train_by_mll


def test_regression_data_is_reproducible_and_leaves_the_global_rng_alone():
    state = torch.random.get_rng_state()
    x, y = regression_data(n=20, d=2, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    again, _ = regression_data(n=20, d=2, seed=3)
    assert torch.equal(x, again) and x.shape == (20, 2) and y.shape == (20,) and x.dtype == torch.float64
    assert bool(((x >= 0) & (x <= 1)).all())
    # y = sum sin(4 x) + 0.1 noise: the residual's standard deviation is about 0.1.
    assert 0.05 < float((y - torch.sin(4 * x).sum(-1)).std()) < 0.2
    assert regression_data(n=7, batch_shape=(2,), dtype=torch.float32)[0].shape == (2, 7, 3)


def test_exact_gp_model_is_the_kernel_and_a_constant_mean():
    x, y = regression_data(n=10, d=2)
    kernel = RandomFourierKernel(16, num_dims=2, seed=0).double()
    model = ExactGPModel(x, y, gpytorch.likelihoods.GaussianLikelihood(), kernel).double()
    model.mean_module.constant.data.fill_(0.4)
    prior = model.forward(x)
    torch.testing.assert_close(prior.mean, torch.full((10,), 0.4, dtype=torch.float64))
    torch.testing.assert_close(prior.covariance_matrix, kernel(x).to_dense())


def test_train_by_mll_lowers_the_loss():
    x, y = regression_data(n=30, d=2)
    kernel = RandomFourierKernel(32, num_dims=2, seed=0).double()
    model = ExactGPModel(x, y, gpytorch.likelihoods.GaussianLikelihood(), kernel).double()
    losses = train_by_mll(model, x, y, steps=20, lr=0.1)
    assert len(losses) == 20 and losses[-1] < losses[0] and model.training
