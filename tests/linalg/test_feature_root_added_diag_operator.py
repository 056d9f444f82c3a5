"""FeatureRootAddedDiagLinearOperator: the marginal likelihood refuses non-finite training data with a count."""

from __future__ import annotations

import gpytorch
import pytest
import torch

import gprf
from gprf.exceptions import NonFiniteTrainingDataError
from tests.prediction.conftest import make_data, make_model


@pytest.mark.parametrize("num_features", [16, 128], ids=["feature-space", "fewer-points-than-features"])
@pytest.mark.parametrize("where", ["target", "input"])
def test_marginal_likelihood_names_the_bad_rows(num_features, where):
    x, y = make_data(n=40)
    if where == "target":
        y[[3, 17]] = torch.tensor([float("nan"), float("inf")], dtype=torch.float64)
    else:
        x[5, 1] = float("nan")
    model = make_model(x, y, num_features=num_features).train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    count = 2 if where == "target" else 1
    # Inputs: the CPU check of the feature map would catch them first; switch it off to reach the factorisation,
    # as on a GPU where that check would cost a host synchronisation per forward pass (and GPyTorch's debug check
    # that the training inputs are passed, which NaN != NaN defeats).
    with gprf.settings.validate_inputs(False), gpytorch.settings.debug(False):
        with pytest.raises(NonFiniteTrainingDataError, match=rf"^{count} of 40 "):
            mll(model(x), y)


def test_factor_dtype_setting_reaches_the_marginal_likelihood():
    x, y = make_data(n=60)
    model = make_model(x, y, num_features=16).train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    reference = mll(model(x), y)
    with gprf.settings.factor_dtype(torch.float32):
        single = mll(model(x), y)
    # The float64 model's value with a float32 factor: equal to float32 accuracy, not to float64's.
    torch.testing.assert_close(single, reference, rtol=1e-5, atol=1e-5)
    assert single.item() != reference.item()
