"""gprf.distributions.MultivariateNormal: the exact O(N F^2) log density of feature-root covariances and the
preconditioned conjugate gradients of PreconditionedKernel covariances under every linear_operator setting,
GPyTorch's behaviour for everything else."""

from __future__ import annotations

import warnings
from unittest import mock

import gpytorch
import pytest
import torch
from linear_operator import settings as linop_settings

import gprf
from gprf.exceptions import DenseCovarianceWarning, LowRankStructureWarning
from gprf.kernels import PreconditionedKernel
from gprf.linalg import FeatureRootAddedDiagLinearOperator
from gprf.testing import regression_data
from tests.helpers.regression import make_model


def _dense_log_prob(model, x, y):
    covariance = model.covar_module(x).to_dense() + model.likelihood.noise * torch.eye(x.size(-2), dtype=x.dtype)
    return torch.distributions.MultivariateNormal(model.mean_module(x), covariance).log_prob(y)


def _spy():
    original = FeatureRootAddedDiagLinearOperator.inv_quad_logdet
    return mock.patch.object(FeatureRootAddedDiagLinearOperator, "inv_quad_logdet", autospec=True, side_effect=original)


@pytest.mark.parametrize("fast_log_prob", [True, False], ids=["gpytorch-default", "botorch-setting"])
def test_structured_density_under_every_setting(fast_log_prob):
    x, y = regression_data()
    model = make_model(x, y).train()
    prior = model(x)
    distribution = gprf.distributions.MultivariateNormal(prior.mean, prior.lazy_covariance_matrix)
    with linop_settings.fast_computations(log_prob=fast_log_prob), _spy() as spy:
        log_prob = model.likelihood(distribution).log_prob(y)
        assert linop_settings.fast_computations.log_prob.on() is fast_log_prob  # the user's setting is restored
    assert spy.call_count == 1
    torch.testing.assert_close(log_prob, _dense_log_prob(model, x, y), rtol=1e-10, atol=1e-10)
    assert type(model.likelihood(distribution)) is gprf.distributions.MultivariateNormal  # likelihoods keep the class


def test_structured_density_of_more_batches_than_the_covariance():
    """Values with a leading batch of 3 against one covariance: each row's density (GPyTorch's batch handling under
    the structured setting), as columns of one solve."""
    x, y = regression_data()
    model = make_model(x, y).train()
    prior = model(x)
    distribution = gprf.distributions.MultivariateNormal(prior.mean, prior.lazy_covariance_matrix)
    values = torch.stack([y, y + 0.5, 2 * y])
    with linop_settings.fast_computations(log_prob=False), _spy() as spy:
        log_prob = model.likelihood(distribution).log_prob(values)
    assert spy.call_count == 1 and log_prob.shape == (3,)
    expected = torch.stack([_dense_log_prob(model, x, value) for value in values])
    torch.testing.assert_close(log_prob, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("value_shape", [(2,), (), (3, 2), (3, 1)], ids=["own", "one", "more", "broadcast"])
def test_structured_density_of_a_batched_covariance_broadcasts_its_values(value_shape):
    x, y = regression_data()
    model = make_model(x, y.expand(2, -1), batch_shape=torch.Size([2])).train()
    prior = model(x)
    distribution = model.likelihood(gprf.distributions.MultivariateNormal(prior.mean, prior.lazy_covariance_matrix))
    generator = torch.Generator().manual_seed(0)
    values = y + 0.3 * torch.randn(*value_shape, 80, generator=generator, dtype=y.dtype)
    with linop_settings.fast_computations(log_prob=False), _spy() as spy:
        log_prob = distribution.log_prob(values)
    assert spy.call_count == 1
    with pytest.warns(LowRankStructureWarning, match="dense 80 x 80"):  # the reference's own dense matrix
        covariance = distribution.covariance_matrix
    reference = torch.distributions.MultivariateNormal(distribution.mean, covariance).log_prob(values)
    assert log_prob.shape == reference.shape == torch.broadcast_shapes(value_shape, (2,))
    torch.testing.assert_close(log_prob, reference, rtol=1e-10, atol=1e-10)


def test_gpytorch_class_takes_the_structured_path_under_its_default():
    x, y = regression_data()
    model = make_model(x, y).train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    with gpytorch.settings.fast_computations.log_prob(True), _spy() as spy:
        loss = -mll(model(x), y)
    assert spy.call_count == 1
    torch.testing.assert_close(-loss, _dense_log_prob(model, x, y) / 80, rtol=1e-10, atol=1e-10)


def test_gpytorch_class_under_botorch_setting_is_dense_and_says_so():
    """GPyTorch consults the flag before the covariance: the same value through a dense Cholesky, with a warning
    that names the fix."""
    x, y = regression_data()
    model = make_model(x, y).train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    with linop_settings.fast_computations(log_prob=False), _spy() as spy:
        with pytest.warns(LowRankStructureWarning, match="gprf.distributions.MultivariateNormal"):
            loss = -mll(model(x), y)
    assert spy.call_count == 0
    torch.testing.assert_close(-loss, _dense_log_prob(model, x, y) / 80, rtol=1e-10, atol=1e-10)


def test_other_covariances_keep_gpytorch_behaviour():
    x, y = regression_data()
    covariance = gpytorch.kernels.RBFKernel().double()(x).add_diagonal(torch.tensor(0.1, dtype=torch.float64))
    ours = gprf.distributions.MultivariateNormal(torch.zeros(80, dtype=torch.float64), covariance)
    theirs = gpytorch.distributions.MultivariateNormal(torch.zeros(80, dtype=torch.float64), covariance)
    for fast_log_prob in (True, False):
        with linop_settings.fast_computations(log_prob=fast_log_prob), warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.testing.assert_close(ours.log_prob(y), theirs.log_prob(y), rtol=0, atol=0)
    with linop_settings.fast_computations(log_prob=False):
        with mock.patch.object(
            torch.distributions.MultivariateNormal, "log_prob", autospec=True, return_value=torch.tensor(0.0)
        ) as dense:
            ours.log_prob(y)
    assert dense.call_count == 1


@pytest.mark.parametrize("fast_log_prob", [True, False], ids=["gpytorch-default", "botorch-setting"])
def test_preconditioned_exact_kernels_take_conjugate_gradients_under_every_setting(fast_log_prob):
    # A linear kernel's random-feature root is exact, so its preconditioned CG/SLQ density is the exact one.
    x, y = regression_data(120)
    base = gpytorch.kernels.ScaleKernel(gpytorch.kernels.LinearKernel()).double()
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    covariance = PreconditionedKernel(base, 8, num_dims=3, seed=0)(x)
    distribution = gprf.distributions.MultivariateNormal(torch.zeros_like(y), covariance)
    with (
        linop_settings.fast_computations(log_prob=fast_log_prob),
        gpytorch.settings.max_cholesky_size(50),
        gpytorch.settings.cg_tolerance(1e-8),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("error", DenseCovarianceWarning)  # never the dense 120 x 120 Cholesky
        log_prob = likelihood(distribution).log_prob(y)
    dense = base(x).to_dense() + likelihood.noise * torch.eye(120, dtype=torch.float64)
    expected = torch.distributions.MultivariateNormal(torch.zeros_like(y), dense).log_prob(y)
    torch.testing.assert_close(log_prob, expected, rtol=1e-7, atol=1e-6)
