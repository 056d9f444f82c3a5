"""model_identity and transform_state: what the ranks compare before a sum."""

from __future__ import annotations

import pytest
import torch

from gprf.distributed.identity import model_identity, transform_state
from gprf.streaming.features import model_fingerprint
from gprf.testing import regression_data
from tests.helpers.regression import make_model


def test_the_identity_is_the_streaming_fingerprint_with_the_likelihood():
    x, y = regression_data(n=20)
    model = make_model(x, y, num_features=16)
    expected = model_fingerprint(model.covar_module, 3, x.dtype, x.device, model.mean_module, model.likelihood)
    torch.testing.assert_close(model_identity(model, 3), expected, rtol=0, atol=0)
    model.likelihood.noise = 0.2  # the noise is part of it
    assert model_identity(model, 3)[..., 16] == pytest.approx(0.2)


def test_transform_state_holds_botorch_transforms_learned_from_the_data():
    pytest.importorskip("botorch")
    from botorch.models.transforms import Normalize, Standardize

    from gprf.botorch import RandomFeatureSingleTaskGP

    x, y = regression_data(n=20)
    plain = make_model(x, y, num_features=16)
    assert transform_state(plain) is None
    bounds = torch.tensor([[0.0] * 3, [1.0] * 3], dtype=torch.float64)

    def botorch_model(rows):
        return RandomFeatureSingleTaskGP(
            x[rows],
            y[rows].unsqueeze(-1),
            num_features=16,
            seed=0,
            input_transform=Normalize(3, bounds=bounds),
            outcome_transform=Standardize(1),
        )

    first, second = transform_state(botorch_model(slice(0, 10))), transform_state(botorch_model(slice(10, 20)))
    assert first.dtype == torch.float64 and first.shape == second.shape
    standardized = y[:10]
    assert first.tolist().count(pytest.approx(float(standardized.mean()))) == 1  # Standardize's mean is in it
    assert not torch.equal(first, second)  # fitted to each half's own targets
