"""gprf covariances keep their exact O(N F^2) log density when fast log_prob is switched off (as BoTorch does)."""

from __future__ import annotations

from unittest import mock

import gpytorch
import torch
from linear_operator import settings as linop_settings

from gprf.operators import FeatureRootAddedDiagLinearOperator
from tests.prediction.conftest import make_data, make_model


def test_feature_path_is_used_when_fast_log_prob_is_off():
    x, y = make_data()
    model = make_model(x, y).train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    original = FeatureRootAddedDiagLinearOperator.inv_quad_logdet
    with linop_settings._fast_log_prob(False):
        with mock.patch.object(FeatureRootAddedDiagLinearOperator, "inv_quad_logdet", autospec=True, side_effect=original) as spy:
            loss = -mll(model(x), y)
        assert linop_settings.fast_computations.log_prob.off()  # the user's setting is restored
    assert spy.call_count == 1
    covar = model.covar_module(x).to_dense() + model.likelihood.noise * torch.eye(80, dtype=torch.float64)
    dense = torch.distributions.MultivariateNormal(model.mean_module(x), covar).log_prob(y) / 80
    torch.testing.assert_close(-loss, dense, rtol=1e-10, atol=1e-10)


def test_other_models_keep_gpytorch_behaviour():
    x, y = make_data()
    mvn = gpytorch.distributions.MultivariateNormal(
        torch.zeros(80, dtype=torch.float64), gpytorch.kernels.RBFKernel().double()(x).add_diagonal(torch.tensor(0.1, dtype=torch.float64))
    )
    with linop_settings._fast_log_prob(False):
        with mock.patch.object(torch.distributions.MultivariateNormal, "log_prob", autospec=True, return_value=torch.tensor(0.0)) as dense:
            mvn.log_prob(y)
    assert dense.call_count == 1
