"""The regression GP shared by ``compare`` and ``bench`` (gprf.cli.models)."""

from __future__ import annotations

import gpytorch
import pytest
import torch

from gprf.cli.models import (
    RegressionGP,
    exact_kernel,
    fit_hyperparameters,
    get_hyperparameters,
    initialize_hyperparameters,
    predict,
    set_hyperparameters,
)
from gprf.kernels import RandomFourierKernel


def _data(n: int = 40, d: int = 2, dtype: torch.dtype = torch.float64):
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=generator, dtype=dtype)
    return x, torch.sin(2 * x[:, 0]) + 0.1 * torch.randn(n, generator=generator, dtype=dtype)


@pytest.mark.parametrize(
    ("name", "cls"), [("rbf", gpytorch.kernels.RBFKernel), ("matern12", gpytorch.kernels.MaternKernel)]
)
def test_exact_kernel(name, cls):
    kernel = exact_kernel(name, 3)
    assert isinstance(kernel, cls) and kernel.ard_num_dims == 3
    with pytest.raises(ValueError, match="valid choices"):
        exact_kernel("cauchy", 3)


def test_composite_specs_build_their_expression_and_start_each_part_at_its_width():
    kernel = exact_kernel("rbf[0:4]*matern52[4:6]+linear", 6)
    assert isinstance(kernel, gpytorch.kernels.AdditiveKernel)
    x, y = _data(d=6)
    model = RegressionGP(x, y, kernel)
    initialize_hyperparameters(model, lengthscale=5.0)
    rbf, matern = model.covar_module.base_kernel.kernels[0].base_kernel.kernels
    torch.testing.assert_close(rbf.lengthscale, torch.full((1, 4), 2.0, dtype=torch.float64))
    torch.testing.assert_close(matern.lengthscale, torch.full((1, 2), 2**0.5, dtype=torch.float64))
    assert get_hyperparameters(model).lengthscale is None  # the parts hold theirs


def test_fit_lowers_the_loss_and_hyperparameters_copy_into_a_random_feature_gp():
    x, y = _data()
    model = RegressionGP(x, y, exact_kernel("rbf", 2))
    initialize_hyperparameters(model, lengthscale=1.0)
    losses = []
    final = fit_hyperparameters(model, 30, callback=lambda step, loss: losses.append(loss))
    assert len(losses) == 30 and final < losses[0]
    hyper = get_hyperparameters(model)

    approx = RegressionGP(x, y, RandomFourierKernel(64, 2, seed=0, ard_num_dims=2))
    set_hyperparameters(approx, hyper)
    copied = get_hyperparameters(approx)
    for field in ("mean_constant", "outputscale", "lengthscale", "noise"):
        torch.testing.assert_close(getattr(copied, field), getattr(hyper, field))
    assert "lengthscale=[" in hyper.describe()


def test_lbfgs_fit_and_noisy_prediction():
    x, y = _data(dtype=torch.float32)
    model = RegressionGP(x, y, exact_kernel("matern52", 2))
    assert next(model.parameters()).dtype == torch.float32
    fit_hyperparameters(model, 10, optimizer="lbfgs")
    mean, noisy = predict(model, x[:5])
    _, latent = predict(model, x[:5], noisy=False)
    torch.testing.assert_close(noisy - latent, model.likelihood.noise.detach().expand(5))
    with pytest.raises(ValueError, match="Unknown optimizer"):
        fit_hyperparameters(model, 1, optimizer="sgd")
