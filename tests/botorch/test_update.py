"""gprf.botorch.update: the weight-space pathwise update equals BoTorch's dense update (same noise draws), and refuses
noise-free likelihoods and non-finite targets."""

from __future__ import annotations

import pytest
import torch
from linear_operator.operators import ZeroLinearOperator

from gprf.botorch import weight_space_update
from gprf.botorch.dispatch import botorch_gaussian_update
from gprf.exceptions import NonFiniteTrainingDataError
from tests.botorch.conftest import make_botorch_model

pytestmark = pytest.mark.botorch


@pytest.mark.parametrize("num_outputs", [1, 2])
@pytest.mark.parametrize("fixed_noise", [False, True])
def test_weight_space_update_equals_the_dense_update(num_outputs, fixed_noise):
    kwargs = {}
    if fixed_noise:
        generator = torch.Generator().manual_seed(1)
        kwargs["train_Yvar"] = 0.05 * torch.rand(40, num_outputs, generator=generator, dtype=torch.float64)
    model = make_botorch_model(num_outputs=num_outputs, **kwargs)
    model.eval()
    (train_x,) = model.train_inputs
    sample_values = torch.randn(
        5, *model.train_targets.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64
    )
    test_x = model.transform_inputs(torch.rand(7, 3, dtype=torch.float64))
    if num_outputs > 1:
        test_x = test_x.unsqueeze(-3)
    with torch.random.fork_rng():
        torch.manual_seed(4)
        ours = weight_space_update(model, model.likelihood, sample_values=sample_values)
    with torch.random.fork_rng():
        torch.manual_seed(4)  # the same observation-noise draws
        dense = botorch_gaussian_update(model, model.likelihood, sample_values=sample_values)
    torch.testing.assert_close(ours(test_x), dense(test_x), rtol=0, atol=1e-9)


def test_noise_free_update_is_refused():
    model = make_botorch_model()
    model.eval()
    sample_values = torch.zeros(2, 40, dtype=torch.float64)
    with pytest.raises(ValueError, match="positive observation noise"):
        weight_space_update(
            model,
            model.likelihood,
            sample_values=sample_values,
            noise_covariance=ZeroLinearOperator(40, 40, dtype=torch.float64),
        )


def test_non_finite_targets_are_refused_by_the_update():
    model = make_botorch_model()
    model.eval()
    targets = model.train_targets.clone()
    targets[..., [0, 5]] = float("nan")
    sample_values = torch.zeros(2, 40, dtype=torch.float64)
    with pytest.raises(NonFiniteTrainingDataError, match="^2 of 40 training points"):
        weight_space_update(model, model.likelihood, sample_values=sample_values, target_values=targets)


def test_update_of_a_kernel_without_a_feature_root_is_refused():
    from botorch.models import SingleTaskGP

    x = torch.rand(10, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    model = SingleTaskGP(x, x.sum(-1, keepdim=True))
    with pytest.raises(TypeError, match="weight-space update needs a gprf random-feature covar_module"):
        weight_space_update(model, model.likelihood, sample_values=torch.zeros(2, 10, dtype=torch.float64))
