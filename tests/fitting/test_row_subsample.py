"""The tuning subsample of ``fit_mll`` carries its rows' observed noise, and everything is restored afterwards."""

from __future__ import annotations

import gpytorch
import pytest
import torch
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood
from gpytorch.mlls import ExactMarginalLogLikelihood

import gprf
from gprf.fitting.recipe import _loss
from gprf.fitting.row_subsample import per_row_noise_models, subsample_rows, training_rows
from gprf.kernels import RandomFourierKernel
from tests.helpers.classification import NUM_CLASSES, make_data, make_model


class _GP(gpytorch.models.ExactGP):
    def __init__(self, x, y, likelihood):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = ScaleKernel(RandomFourierKernel(64, num_dims=2, ard_num_dims=2, seed=3))

    def forward(self, x):
        return gprf.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _observed_noise_data(n: int = 600):
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(n, 2, generator=generator, dtype=torch.float64)
    # Heteroscedastic: a subsample that took the wrong rows' noise (or none) scores differently.
    noise = 0.005 + 0.05 * torch.rand(n, generator=generator, dtype=torch.float64)
    y = torch.sin(6 * x[:, 0]) * x[:, 1] + noise.sqrt() * torch.randn(n, generator=generator, dtype=torch.float64)
    return x, y, noise


def _mll(x, y, noise) -> ExactMarginalLogLikelihood:
    likelihood = FixedNoiseGaussianLikelihood(noise=noise)
    return ExactMarginalLogLikelihood(likelihood, _GP(x, y, likelihood).double())


def test_the_tuning_loss_is_the_marginal_likelihood_of_the_subsample_with_its_noise():
    x, y, noise = _observed_noise_data()
    mll = _mll(x, y, noise)
    model = mll.model
    rows = subsample_rows(600, 200, 7, torch.device("cpu"))
    seen = {}

    def compare(stage: str, _: float) -> None:
        if stage != "tune 1":
            return
        with torch.no_grad():
            seen["tuning"] = _loss(mll).item()
            reference = _mll(x[rows], y[rows], noise[rows])
            reference.model.load_state_dict(model.state_dict())
            reference.train()
            output = reference.model(x[rows])
            seen["reference"] = -reference(output, y[rows]).item()

    gprf.fit_mll(mll, tune_rows=200, tune_features=None, tune_steps=3, seed=7, callback=compare)
    # -mll/N of the 200 rows with their own noise variances (zero noise would give ~1e10).
    assert seen["tuning"] == pytest.approx(seen["reference"], rel=1e-10)
    assert abs(seen["reference"]) < 10


def test_the_full_data_and_noise_are_back_after_the_fit():
    x, y, noise = _observed_noise_data()
    mll = _mll(x, y, noise)
    model, noise_covar = mll.model, mll.likelihood.noise_covar
    inputs, targets, stored_noise = model.train_inputs[0], model.train_targets, noise_covar.noise
    gprf.fit_mll(mll, tune_rows=150, tune_features=16, tune_steps=2)
    assert model.train_inputs[0] is inputs and model.train_targets is targets
    assert noise_covar.noise is stored_noise


def test_training_rows_indexes_batched_noise_and_restores_it_after_an_error():
    x, y, noise = _observed_noise_data(50)
    batched_noise = torch.stack([noise, 2 * noise])
    likelihood = FixedNoiseGaussianLikelihood(noise=batched_noise)
    model = _GP(x, y.expand(2, 50), likelihood).double()
    rows = torch.tensor([3, 10, 41])
    assert per_row_noise_models(likelihood, 50) == [likelihood.noise_covar]
    with pytest.raises(RuntimeError, match="inside"), training_rows(model, likelihood, rows):
        torch.testing.assert_close(likelihood.noise_covar.noise, batched_noise[:, rows], rtol=0, atol=0)
        torch.testing.assert_close(model.train_targets, y.expand(2, 50)[:, rows], rtol=0, atol=0)
        torch.testing.assert_close(model.train_inputs[0], x[rows], rtol=0, atol=0)
        raise RuntimeError("inside")
    assert likelihood.noise_covar.noise is batched_noise and model.train_targets.size(-1) == 50


def test_a_dirichlet_classifier_tunes_on_a_row_subsample(float64):
    x, labels = make_data(300, seed=1)
    model = make_model(x, labels).train()
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    noise = model.likelihood.noise_covar.noise

    def full_mll() -> float:
        mll.train()
        with torch.no_grad():
            return mll(model(x), model.train_targets).sum().item()

    before = full_mll()
    gprf.fit_mll(mll, tune_rows=100, tune_features=16, tune_steps=15)
    assert model.likelihood.noise_covar.noise is noise and noise.shape == (NUM_CLASSES, 300)
    assert full_mll() > before


def test_botorch_observed_noise_reaches_the_subsample():
    from botorch.fit import fit_gpytorch_mll

    from gprf.botorch import RandomFeatureSingleTaskGP

    x, y, noise = _observed_noise_data(300)
    model = RandomFeatureSingleTaskGP(x, y.unsqueeze(-1), noise.unsqueeze(-1), num_features=64, seed=0)
    mll = ExactMarginalLogLikelihood(model.likelihood, model)
    sizes = []

    def record(stage: str, _: float) -> None:
        if stage == "tune 1":
            sizes.append((model.likelihood.noise.size(-1), model.train_targets.size(-1)))

    fit_gpytorch_mll(mll, tune_rows=120, tune_features=16, tune_steps=2, callback=record)
    assert sizes == [(120, 120)] and model.likelihood.noise.size(-1) == 300
