"""gprf.botorch.paths: a Matheron path whose prior and update share their feature map featurises its inputs once per
evaluation (single-task and MultiTaskGP paths, a counted spy on the feature map and on the kernel's features) and gives
the values of BoTorch's MatheronPath on the same two paths, bit for bit — with input transforms, a mean, an ensemble
dimension — also after a caller replaced one of them."""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from botorch.models.transforms import Normalize
from botorch.sampling.pathwise import draw_matheron_paths
from botorch.sampling.pathwise.paths import GeneralizedLinearPath
from botorch.sampling.pathwise.posterior_samplers import MatheronPath
from gpytorch.means import LinearMean

from gprf.botorch import KernelRootFeatureMap
from gprf.botorch.multitask import TaskRootFeatureMap
from gprf.botorch.paths import SharedFeatureMatheronPath
from gprf.kernels import RandomFourierKernel
from tests.botorch.conftest import make_botorch_model
from tests.botorch.test_multitask import _sampling_model, _task_points

pytestmark = pytest.mark.botorch


def _botorch_values(paths: MatheronPath, x: torch.Tensor) -> torch.Tensor:
    """What BoTorch's ``MatheronPath`` gives with the same prior and update paths and output transform."""
    reference = MatheronPath(
        prior_paths=paths["prior_paths"], update_paths=paths["update_paths"], output_transform=paths.output_transform
    )
    return reference(x)


def _spy(feature_map_type: type):
    return mock.patch.object(feature_map_type, "forward", autospec=True, side_effect=feature_map_type.forward)


@pytest.mark.parametrize("num_outputs", [1, 2])
def test_a_path_evaluation_featurises_its_inputs_once(num_outputs):
    # A non-zero mean and Normalize/Standardize: the prior path's bias and both transforms take part.
    model = make_botorch_model(num_outputs=num_outputs, n=30, num_features=32)
    with torch.no_grad():
        model.mean_module.constant.fill_(0.8)
    model.eval()
    torch.manual_seed(0)
    paths = draw_matheron_paths(model, torch.Size([4]))
    assert isinstance(paths, SharedFeatureMatheronPath) and isinstance(paths, MatheronPath)
    assert paths["update_paths"].feature_map is paths["prior_paths"].feature_map
    x = torch.rand(7, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    if num_outputs > 1:
        x = x.unsqueeze(-3)
    with _spy(KernelRootFeatureMap) as spy:
        values = paths(x)
        assert spy.call_count == 1
        expected = _botorch_values(paths, x)
        assert spy.call_count == 3  # BoTorch's MatheronPath: once per path
    assert values.shape == ((4, 7) if num_outputs == 1 else (4, 2, 7))
    assert torch.equal(values, expected)


def test_a_multitask_path_evaluation_featurises_its_inputs_once():
    model = _sampling_model()
    torch.manual_seed(0)
    paths = draw_matheron_paths(model, torch.Size([3]))
    points = _task_points()
    with _spy(TaskRootFeatureMap) as spy:
        values = paths(points)
        assert spy.call_count == 1
        expected = _botorch_values(paths, points)
    assert values.shape == (3, 12) and torch.equal(values, expected)


@pytest.mark.parametrize("ensemble", [None, "as-batch", "not-as-batch"])
def test_shared_paths_give_botorchs_values(ensemble):
    # Built directly: a linear mean (so the bias sees the transformed points), an input transform, and an ensemble
    # dimension that the paths add themselves (not-as-batch) or read from the inputs (as-batch).
    kernel = RandomFourierKernel(16, num_dims=2, batch_shape=torch.Size([3]), seed=0).double()
    feature_map = KernelRootFeatureMap(kernel)
    transform = Normalize(2, bounds=torch.tensor([[-1.0, 0.0], [1.0, 4.0]], dtype=torch.float64)).eval()
    mean = LinearMean(2).double()
    generator = torch.Generator().manual_seed(2)
    shared = {"feature_map": feature_map, "input_transform": transform, "is_ensemble": ensemble is not None}
    prior = GeneralizedLinearPath(
        weight=torch.randn(5, 3, 16, generator=generator, dtype=torch.float64), bias_module=mean, **shared
    )
    update = GeneralizedLinearPath(weight=torch.randn(5, 3, 16, generator=generator, dtype=torch.float64), **shared)
    paths = SharedFeatureMatheronPath(prior_paths=prior, update_paths=update)
    paths.set_ensemble_as_batch(ensemble == "as-batch")
    x = torch.rand(4, 2, generator=generator, dtype=torch.float64)
    if ensemble == "as-batch":
        x = x.expand(3, 4, 2)
    with _spy(KernelRootFeatureMap) as spy:
        values = paths(x)
    assert spy.call_count == 1 and values.shape == (5, 3, 4)
    assert torch.equal(values, _botorch_values(paths, x))


def test_a_replaced_path_is_evaluated_as_botorch_does():
    model = make_botorch_model(n=30, num_features=32).eval()
    torch.manual_seed(0)
    paths = draw_matheron_paths(model, torch.Size([4]))
    prior = paths["prior_paths"]
    # An update path on its own copy of the map: the two paths no longer share one featurisation.
    paths["update_paths"] = GeneralizedLinearPath(
        feature_map=KernelRootFeatureMap(model.covar_module, num_inputs=3),
        weight=torch.ones_like(prior.weight),
        input_transform=prior.input_transform,
    )
    x = torch.rand(6, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with _spy(KernelRootFeatureMap) as spy:
        values = paths(x)
    assert spy.call_count == 2
    assert torch.equal(values, _botorch_values(paths, x))
    manual = prior(x) + paths["update_paths"](x)
    torch.testing.assert_close(values, paths.output_transform(manual), rtol=0, atol=0)
