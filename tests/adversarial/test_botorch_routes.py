"""BoTorch's model and pathwise test patterns on :class:`gprf.botorch.RandomFeatureSingleTaskGP` (posterior shapes
over input and output batches, observation noise, ``subset_output``, ``condition_on_observations``, ``fantasize``,
``draw_matheron_paths``), and the inconsistent arguments the model must refuse."""

from __future__ import annotations

import math

import gpytorch
import pytest
import torch

pytest.importorskip("botorch")

from botorch.exceptions import BotorchTensorDimensionError, InputDataError
from botorch.models import MultiTaskGP, SingleTaskGP
from botorch.sampling import SobolQMCNormalSampler
from botorch.sampling.pathwise import draw_matheron_paths
from gpytorch.kernels import ScaleKernel

from gprf.botorch import (
    KernelRootFeatureMap,
    RandomFeatureSingleTaskGP,
    multitask_matheron_paths,
    weight_space_matheron_paths,
)
from gprf.kernels import (
    AdditiveFeatureKernel,
    ArcCosineQuadratureKernel,
    LinearFeatureKernel,
    MaclaurinKernel,
    OffsetPolynomialSketchKernel,
    PolynomialSketchKernel,
    QuadratureKernel,
    RandomFourierKernel,
)
from gprf.testing import z_bound

pytestmark = pytest.mark.botorch
D = 3


def _data(n=16, num_outputs=1, batch=()):
    x = torch.rand(*batch, n, D, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    y = torch.stack([torch.sin(6 * x).sum(-1), x.sum(-1), x[..., 0]], -1)[..., :num_outputs]
    return x, y


def _model(num_outputs=1, batch=(), **kwargs):
    x, y = _data(num_outputs=num_outputs, batch=batch)
    return RandomFeatureSingleTaskGP(x, y, num_features=32, seed=0, **kwargs)


# ------------------------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        (lambda x, y: (x, y[:5]), ValueError, r"train_Y has 5 rows \(shape \(5, 1\)\) but train_X has 16"),
        (lambda x, y: (x, y, y[:5].abs()), ValueError, "train_Yvar has 5 rows"),
        (lambda x, y: (x, y[:, 0]), BotorchTensorDimensionError, "explicit output dimension"),
        (lambda x, y: (torch.full_like(x, math.nan), y), InputDataError, "contains NaN"),
        (lambda x, y: (x.float(), y), InputDataError, "share the same dtype"),
    ],
)
def test_inconsistent_training_data_is_refused(arguments, error, match):
    with pytest.raises(error, match=match):
        RandomFeatureSingleTaskGP(*arguments(*_data()), num_features=8)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_features": 0}, ValueError, "num_features must be a positive integer, got 0"),
        ({"num_features": 7}, ValueError, "must be even"),
        ({"kernel": "periodic"}, ValueError, "Unknown kernel 'periodic'"),
        ({"sampler": "foo"}, ValueError, "Unknown sampler 'foo'"),
        ({"covar_module": gpytorch.kernels.RBFKernel()}, TypeError, "RBFKernel has no finite feature map"),
    ],
)
def test_bad_model_options_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        RandomFeatureSingleTaskGP(*_data(), **kwargs)


def test_a_kernel_without_the_output_batch_shape_is_refused():
    with pytest.raises(ValueError, match=r"covar_module has batch_shape \(\) but the model needs \(2,\)"):
        RandomFeatureSingleTaskGP(*_data(num_outputs=2), covar_module=RandomFourierKernel(8, num_dims=D))


@pytest.mark.parametrize("X", [torch.rand(4, 2), torch.rand(3), torch.rand(2, 4, 5)])
def test_points_of_another_width_are_refused(X):
    with pytest.raises(ValueError, match=r"X must have shape \(\.\.\., q, 3\) like the training inputs"):
        _model().posterior(X.double())


@pytest.mark.parametrize("idcs", [[2], [-3], [0, 5], [True]])
def test_subset_output_refuses_indices_of_no_output(idcs):
    with pytest.raises(IndexError, match=r"subset_output: idcs must be output indices in \[0, 2\)"):
        _model(num_outputs=2).subset_output(idcs)


def test_pathwise_sampling_refuses_dense_kernels():
    with pytest.raises(TypeError, match="RBFKernel has no finite feature map"):
        KernelRootFeatureMap(gpytorch.kernels.RBFKernel())
    with pytest.raises(TypeError, match="needs a gprf random-feature covar_module"):
        weight_space_matheron_paths(SingleTaskGP(*_data()), torch.Size([2]))


# ------------------------------------------------------------------------------------------------ BoTorch's patterns
@pytest.mark.parametrize("num_outputs", [1, 2])
@pytest.mark.parametrize("test_batch", [(), (2,), (3, 2)])
def test_posterior_shapes_over_input_and_output_batches(num_outputs, test_batch):
    model = _model(num_outputs, outcome_transform=None)  # the noise in the targets' own units
    X = torch.rand(*test_batch, 4, D, dtype=torch.float64)
    posterior = model.posterior(X)
    assert posterior.mean.shape == (*test_batch, 4, num_outputs)
    assert posterior.variance.shape == (*test_batch, 4, num_outputs)
    noisy = model.posterior(X, observation_noise=True)
    noise = model.likelihood.noise.detach().reshape(num_outputs)
    torch.testing.assert_close(noisy.variance, posterior.variance + noise, rtol=1e-9, atol=1e-12)


def test_empty_test_points_give_empty_posteriors():
    assert _model(2).posterior(torch.zeros(0, D, dtype=torch.float64)).mean.shape == (0, 2)


def test_a_batch_of_training_sets_gives_a_batch_of_posteriors():
    model = _model(batch=(2,))
    X = torch.rand(2, 4, D, dtype=torch.float64)
    mean = model.posterior(X).mean
    assert mean.shape == (2, 4, 1) and bool(mean.isfinite().all())
    assert model.posterior(X[:1]).mean.shape == (2, 4, 1)  # one test batch broadcasts over the training batch


def test_subset_output_is_the_same_posterior_as_the_full_model():
    model = _model(num_outputs=3)
    X = torch.rand(5, D, dtype=torch.float64)
    full = model.posterior(X)
    subset = model.subset_output([2, 0]).posterior(X)
    torch.testing.assert_close(subset.mean, full.mean[:, [2, 0]], rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(subset.variance, full.variance[:, [2, 0]], rtol=1e-9, atol=1e-12)


def test_condition_on_observations_shapes_and_the_conditioned_mean():
    model = _model(outcome_transform=None)
    X = torch.rand(5, D, dtype=torch.float64)
    model.posterior(X)
    new_x = torch.rand(2, D, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    new_y = model.posterior(new_x).mean.detach() + 1.0  # one unit above the current posterior mean
    conditioned = model.condition_on_observations(new_x, new_y)
    assert conditioned.train_targets.shape == (18,)
    assert conditioned.posterior(X).mean.shape == (5, 1)
    moved = conditioned.posterior(new_x).mean - model.posterior(new_x).mean
    assert bool((moved > 0).all()) and bool((moved < 1).all())  # towards the new targets, not past them


def test_condition_on_observations_with_points_of_another_width_fails_in_gpytorch_as_documented():
    model = _model()
    model.posterior(torch.rand(2, D, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="Sizes of tensors must match"):
        model.condition_on_observations(torch.rand(2, 2, dtype=torch.float64), torch.zeros(2, 1, dtype=torch.float64))


@pytest.mark.parametrize("num_outputs", [1, 2])
def test_fantasize_shapes(num_outputs):
    model = _model(num_outputs)
    sampler = SobolQMCNormalSampler(torch.Size([3]), seed=0)
    fantasy = model.fantasize(torch.rand(2, D, dtype=torch.float64), sampler)
    assert fantasy.posterior(torch.rand(4, D, dtype=torch.float64)).mean.shape == (3, 4, num_outputs)


@pytest.mark.parametrize("num_outputs", [1, 2])
def test_matheron_path_shapes(num_outputs):
    paths = draw_matheron_paths(_model(num_outputs), sample_shape=torch.Size([5]))
    values = paths(torch.rand(7, D, dtype=torch.float64))
    assert values.shape == ((5, 7) if num_outputs == 1 else (5, num_outputs, 7))


def test_matheron_paths_refuse_points_of_another_width():
    paths = draw_matheron_paths(_model(), sample_shape=torch.Size([2]))
    with pytest.raises(ValueError, match=r"take points of shape \(\.\.\., n, 3\)"):
        paths(torch.rand(4, 2, dtype=torch.float64))


def test_matheron_paths_are_unbiased_for_the_posterior_mean():
    """Each path value at x is a draw of N(mean(x), var(x)): the mean of S paths is within a z-bound of mean(x)."""
    model = _model()
    X = torch.rand(6, D, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    posterior = model.posterior(X)
    num_paths = 4096
    torch.manual_seed(0)
    values = draw_matheron_paths(model, sample_shape=torch.Size([num_paths]))(X).detach()
    mean, variance = posterior.mean.squeeze(-1).detach(), posterior.variance.squeeze(-1).detach()
    z = (values.mean(0) - mean) / (variance / num_paths).sqrt()
    assert float(z.abs().max()) < z_bound(6)
    # and their spread is the posterior variance, within the chi-square's standard error sqrt(2/S) (z-bound)
    spread = values.var(0) / variance
    assert float((spread - 1).abs().max()) < z_bound(6) * math.sqrt(2 / num_paths)


def test_a_drawn_path_keeps_its_draw_after_resample_features():
    model = _model()
    paths = draw_matheron_paths(model, sample_shape=torch.Size([3]))
    X = torch.rand(4, D, dtype=torch.float64)
    before = paths(X)
    model.covar_module.resample_features(torch.Generator().manual_seed(3))
    assert torch.equal(paths(X), before)


def test_pathwise_entry_points_refuse_an_int_sample_shape():
    model = _model()
    model.eval()
    with pytest.raises(TypeError, match=r"sample_shape must be a torch.Size of sample sizes, e.g. torch.Size\(\[2\]\)"):
        weight_space_matheron_paths(model, 2)


def test_multitask_paths_refuse_a_model_that_is_not_a_multitask_gp():
    model = _model()
    model.eval()
    with pytest.raises(TypeError, match="needs a BoTorch MultiTaskGP, got RandomFeatureSingleTaskGP"):
        multitask_matheron_paths(model, torch.Size([2]))


def test_multitask_paths_of_a_gprf_data_kernel_have_the_sample_and_point_shape():
    x, y = _data()
    tasks = torch.arange(16, dtype=torch.float64).remainder(2).unsqueeze(-1)
    model = MultiTaskGP(
        torch.cat([x, tasks], -1), y, task_feature=-1, covar_module=ScaleKernel(RandomFourierKernel(16, num_dims=D))
    ).eval()
    values = multitask_matheron_paths(model, torch.Size([4]))(torch.cat([x[:5], tasks[:5]], -1))
    assert values.shape == (4, 5) and bool(values.isfinite().all())


def test_test_batches_that_do_not_broadcast_with_the_training_batch_are_refused():
    model = _model(batch=(2,))
    with pytest.raises(ValueError, match=r"X has batch shape \(3,\), which does not broadcast .* \(2,\)"):
        model.posterior(torch.rand(3, 4, D, dtype=torch.float64))


@pytest.mark.parametrize("change", ["lengthscale", "resample"])
def test_a_posterior_after_a_change_is_the_posterior_of_the_changed_model(change):
    model, reference = _model(), _model()
    X = torch.rand(4, D, dtype=torch.float64)
    model.posterior(X)
    for target in (model, reference):
        if change == "lengthscale":
            target.covar_module.lengthscale = 0.9
        else:
            target.covar_module.resample_features(torch.Generator().manual_seed(5))
    torch.testing.assert_close(model.posterior(X).mean, reference.posterior(X).mean, rtol=1e-10, atol=1e-12)


#: One feature kernel per family, built for the output batch of a two-output model.
FAMILIES = {
    "fourier": lambda b: RandomFourierKernel(32, num_dims=D, seed=0, batch_shape=b),
    "maclaurin": lambda b: MaclaurinKernel(32, num_dims=D, seed=0, batch_shape=b),
    "sketch": lambda b: PolynomialSketchKernel(32, num_dims=D, degree=2, seed=0, batch_shape=b),
    "offset_sketch": lambda b: OffsetPolynomialSketchKernel(32, num_dims=D, degree=2, seed=0, batch_shape=b),
    "quadrature": lambda b: QuadratureKernel(2, num_dims=D, seed=0, batch_shape=b),
    "arc_cosine": lambda b: ArcCosineQuadratureKernel(2, num_dims=D, order=1, seed=0, batch_shape=b),
    "additive": lambda b: AdditiveFeatureKernel(8, num_dims=D, seed=0, batch_shape=b),
    "linear": lambda b: LinearFeatureKernel(num_dims=D, batch_shape=b),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_passes_botorchs_model_and_pathwise_patterns(family):
    """Two outputs: posterior shapes, ``subset_output`` equal to the full model's column, and Matheron paths whose
    mean over S paths is within a z-bound of the posterior mean (standard error from the posterior variance)."""
    batch = torch.Size([2])
    x, y = _data(num_outputs=2)
    kernel = gpytorch.kernels.ScaleKernel(FAMILIES[family](batch), batch_shape=batch)
    model = RandomFeatureSingleTaskGP(x, y, covar_module=kernel)
    X = torch.rand(5, D, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    posterior = model.posterior(X)
    assert posterior.mean.shape == (5, 2) and posterior.variance.shape == (5, 2)
    subset = model.subset_output([1]).posterior(X)
    torch.testing.assert_close(subset.mean[:, 0], posterior.mean[:, 1], rtol=1e-9, atol=1e-12)
    num_paths = 1024
    torch.manual_seed(0)
    values = draw_matheron_paths(model, sample_shape=torch.Size([num_paths]))(X).detach()  # paths x outputs x points
    mean, variance = posterior.mean.detach().mT, posterior.variance.detach().mT
    z = (values.mean(0) - mean) / (variance / num_paths).sqrt()
    assert float(z.abs().max()) < z_bound(z.numel() * len(FAMILIES))
