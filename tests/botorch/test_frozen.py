"""gprf.botorch.frozen: a drawn sample path keeps the draw and the model state it was made with — after
``resample_features()``, new hyperparameters, a new mean or a moved input transform its values are the same, bit for
bit, on every pathwise route gprf serves (weight-space Matheron paths, BoTorch's route with gprf's update, the dense
update with a caller's Cholesky factor, prior paths, MultiTaskGP paths) — while new paths follow the changed model;
and the copies it is built on are detached."""

from __future__ import annotations

import pytest
import torch
from botorch.models.transforms import Normalize
from botorch.sampling.pathwise import draw_kernel_feature_paths, draw_matheron_paths, gaussian_update
from gpytorch.kernels import ScaleKernel

from gprf.botorch.frozen import frozen_copy
from gprf.kernels import RandomFourierKernel, unwrap_scale_kernel
from tests.botorch.conftest import make_botorch_model
from tests.botorch.test_multitask import _sampling_model, _task_points

pytestmark = pytest.mark.botorch


def _dense_update(model, **kwargs):
    """BoTorch's dense update with a caller-supplied Cholesky factor of K + Sigma (the route gprf leaves dense)."""
    (points,) = model.train_inputs
    noise = torch.diag_embed(model.likelihood.noise.expand(points.shape[:-1]))
    covariance = model.covar_module(points).to_dense() + noise
    return gaussian_update(model=model, scale_tril=torch.linalg.cholesky(covariance), **kwargs)


ROUTES = {
    "weight-space-matheron": lambda model: draw_matheron_paths(model, torch.Size([4])),
    "botorch-route-gprf-update": lambda model: draw_matheron_paths(
        model, torch.Size([4]), update_strategy=lambda **kwargs: gaussian_update(**kwargs)
    ),
    "dense-update": lambda model: draw_matheron_paths(model, torch.Size([4]), update_strategy=_dense_update),
    "prior": lambda model: draw_kernel_feature_paths(model, torch.Size([4])),
}


def _model(num_outputs: int):
    """``make_botorch_model`` with an amplitude (``ScaleKernel``) around its random Fourier kernel."""
    batch_shape = torch.Size([num_outputs]) if num_outputs > 1 else torch.Size()
    kernel = RandomFourierKernel(64, num_dims=3, ard_num_dims=3, batch_shape=batch_shape, seed=0)
    return make_botorch_model(num_outputs, covar_module=ScaleKernel(kernel, batch_shape=batch_shape).double()).eval()


def _change_everything(model) -> None:
    """A new feature draw, new hyperparameters, a new mean and a new input normalisation, in place."""
    kernel = unwrap_scale_kernel(model.covar_module)
    kernel.resample_features(torch.Generator().manual_seed(123))
    with torch.no_grad():
        kernel.lengthscale = 0.5 * kernel.lengthscale
        model.covar_module.outputscale = 3 * model.covar_module.outputscale
        model.mean_module.constant.add_(2.0)
        model.likelihood.noise = 0.5
        model.input_transform.bounds.mul_(2.0)


@pytest.mark.parametrize("num_outputs", [1, 2])
@pytest.mark.parametrize("route", ROUTES)
def test_a_drawn_path_keeps_its_draw_and_model_state(route, num_outputs):
    model = _model(num_outputs)
    test_x = torch.rand(6, 3, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    if num_outputs > 1:
        test_x = test_x.unsqueeze(-3)
    torch.manual_seed(0)
    paths = ROUTES[route](model)
    before = paths(test_x)
    _change_everything(model)
    torch.testing.assert_close(paths(test_x), before, rtol=0, atol=0)
    # New paths (same random numbers) follow the changed model.
    torch.manual_seed(0)
    assert (ROUTES[route](model)(test_x) - before).abs().max() > 0.1


def test_a_drawn_path_keeps_its_input_gradient():
    model = _model(1)
    paths = draw_matheron_paths(model, torch.Size([2]))
    x = torch.rand(3, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64, requires_grad=True)
    (gradient,) = torch.autograd.grad(paths(x).sum(), x)
    step = 1e-6
    offset = torch.zeros_like(x)
    offset[1, 2] = step
    with torch.no_grad():
        numerical = (paths(x + offset).sum() - paths(x - offset).sum()) / (2 * step)
    torch.testing.assert_close(gradient[1, 2], numerical, rtol=1e-5, atol=1e-8)
    assert not any(parameter.requires_grad for parameter in paths.parameters())  # no path to the hyperparameters


def test_multitask_paths_keep_their_draw_and_model_state():
    model = _sampling_model()
    points = _task_points()
    torch.manual_seed(0)
    paths = draw_matheron_paths(model, torch.Size([3]))
    before = paths(points)
    unwrap_scale_kernel(model.covar_module.kernels[0]).resample_features(torch.Generator().manual_seed(9))
    with torch.no_grad():
        for mean in model.mean_module.base_means:
            mean.constant.add_(1.0)
    model.train()  # a model put back into training mode does not reach the drawn paths either
    torch.testing.assert_close(paths(points), before, rtol=0, atol=0)


def test_frozen_copy_is_detached_and_independent():
    assert frozen_copy(None) is None
    transform = Normalize(2, bounds=torch.tensor([[0.0, 0.0], [1.0, 2.0]]))
    frozen = frozen_copy(transform)
    transform.bounds.mul_(3.0)
    torch.testing.assert_close(frozen.bounds, torch.tensor([[0.0, 0.0], [1.0, 2.0]]))
    # A buffer computed with autograd (deepcopy alone refuses it) is copied as its detached value.
    module = torch.nn.Linear(2, 1)
    module.register_buffer("solved", module.weight * 2.0)
    frozen = frozen_copy(module)
    assert frozen.solved.grad_fn is None and not frozen.weight.requires_grad
    torch.testing.assert_close(frozen.solved, 2.0 * module.weight.detach())
    assert module.weight.requires_grad  # the original is untouched
