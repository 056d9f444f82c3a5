"""gprf.botorch.paths: a Matheron path whose prior and update share their feature map featurises its inputs once per
evaluation (single-task and MultiTaskGP paths; the feature map's calls counted) and gives BoTorch's sum of the two paths
within the rounding bound of the sums over features — with input transforms, a mean, an ensemble dimension, inputs
shared by the samples or one set per sample — and, once a caller replaced one of them, BoTorch's evaluation itself."""

from __future__ import annotations

from contextlib import contextmanager
from unittest import mock

import pytest
import torch
from botorch.models.transforms import Normalize
from botorch.sampling.pathwise import draw_matheron_paths
from botorch.sampling.pathwise.paths import GeneralizedLinearPath, PathDict
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


@contextmanager
def _recorded(feature_map_type: type):
    """The features ``feature_map_type`` computes inside the block, in order."""
    features = []
    original = feature_map_type.forward

    def record(self, *args, **kwargs):
        features.append(original(self, *args, **kwargs))
        return features[-1]

    with mock.patch.object(feature_map_type, "forward", record):
        yield features


def _linear(features: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return (features @ weight.unsqueeze(-1)).squeeze(-1)  # BoTorch's GeneralizedLinearPath


def _assert_botorchs_sum(paths: MatheronPath, x: torch.Tensor, feature_map_type: type) -> torch.Tensor:
    r"""``paths`` (before its outcome untransform) featurises ``x`` once and gives BoTorch's sum of its two paths, which
    featurises twice: the two differ only in the order of each sum over the F features, so by at most
    :math:`2\gamma_F\sum_f|\phi_f|(|w_f| + |v_f|)`, :math:`\gamma_F = F\epsilon / (1 - F\epsilon)` the bound of a sum
    of F products in any order, plus the rounding of the two additions. Returns the values."""
    with _recorded(feature_map_type) as features:
        values = paths.forward(x)
    assert len(features) == 1
    with _recorded(feature_map_type) as again:
        expected = PathDict.forward(paths, x)  # BoTorch's MatheronPath evaluation
    assert len(again) == 2 and torch.equal(again[0], features[0]) and torch.equal(again[1], features[0])
    (phi,) = features
    eps = torch.finfo(phi.dtype).eps
    gamma = phi.size(-1) * eps / (1 - phi.size(-1) * eps)
    absolute = sum(_linear(phi.abs(), paths[name].weight.abs()) for name in ("prior_paths", "update_paths"))
    bound = 2 * gamma * absolute + 4 * eps * expected.abs()
    assert values.shape == expected.shape and bool(((values - expected).abs() <= bound).all())
    return values


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
    values = _assert_botorchs_sum(paths, x, KernelRootFeatureMap)
    assert values.shape == ((4, 7) if num_outputs == 1 else (4, 2, 7))
    with _recorded(KernelRootFeatureMap) as features:
        untransformed = paths(x)
    assert len(features) == 1
    torch.testing.assert_close(untransformed, paths.output_transform(values), rtol=0, atol=0)


def test_a_multitask_path_evaluation_featurises_its_inputs_once():
    model = _sampling_model()
    torch.manual_seed(0)
    paths = draw_matheron_paths(model, torch.Size([3]))
    assert _assert_botorchs_sum(paths, _task_points(), TaskRootFeatureMap).shape == (3, 12)


@pytest.mark.parametrize("inputs", ["shared", "per-sample"])
@pytest.mark.parametrize("ensemble", [None, "as-batch", "not-as-batch"])
def test_shared_paths_give_botorchs_sum(ensemble, inputs):
    # Built directly: a linear mean (so the bias sees the transformed points), an input transform, and an ensemble
    # dimension that the paths add themselves (not-as-batch) or read from the inputs (as-batch); the inputs either
    # shared by the 5 samples or one set per sample (then the features have the samples' batch and nothing is folded).
    kernel = RandomFourierKernel(16, num_dims=2, batch_shape=torch.Size([3]), seed=0).double()
    transform = Normalize(2, bounds=torch.tensor([[-1.0, 0.0], [1.0, 4.0]], dtype=torch.float64)).eval()
    generator = torch.Generator().manual_seed(2)
    shared = {"feature_map": KernelRootFeatureMap(kernel), "input_transform": transform}
    shared["is_ensemble"] = ensemble is not None
    prior = GeneralizedLinearPath(
        weight=torch.randn(5, 3, 16, generator=generator, dtype=torch.float64),
        bias_module=LinearMean(2).double(),
        **shared,
    )
    update = GeneralizedLinearPath(weight=torch.randn(5, 3, 16, generator=generator, dtype=torch.float64), **shared)
    paths = SharedFeatureMatheronPath(prior_paths=prior, update_paths=update)
    paths.set_ensemble_as_batch(ensemble == "as-batch")
    x = torch.rand(4, 2, generator=generator, dtype=torch.float64)
    if ensemble == "as-batch":
        x = x.expand(3, 4, 2)
    if inputs == "per-sample":  # batch 5 x 3 once the paths (not-as-batch) added the ensemble dimension
        offset = torch.rand(5, *([] if ensemble == "not-as-batch" else [1]), 1, 2, generator=generator)
        x = x + offset.double()
    assert _assert_botorchs_sum(paths, x, KernelRootFeatureMap).shape == (5, 3, 4)


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
    with _recorded(KernelRootFeatureMap) as features:
        values = paths(x)
    assert len(features) == 2
    assert torch.equal(values, _botorch_values(paths, x))
