r"""Posterior sample paths of BoTorch's ``MultiTaskGP`` with a gprf data kernel, by Matheron's rule in weight space.

``MultiTaskGP(train_X, train_Y, task_feature=..., covar_module=<gprf kernel>)`` has the covariance
:math:`k((x, i), (y, j)) = k_{\mathrm{data}}(x, y)B_{ij}` with the exact Kronecker feature root
:math:`\phi(x, t) = r(x)\otimes L_t` (:class:`~gprf.kernels.FeatureProductKernel` of the data kernel and
:class:`~gprf.kernels.IndexRootKernel`), a per-task mean (``MultitaskMean``) and per-task noise
(``HadamardGaussianLikelihood``). BoTorch 0.18.1 has no pathwise route for it with any kernel: its ``ExactGP`` prior
sampler adds ``model.mean_module`` (one column per task) to the path values as a bias, which fails on the
:math:`N` training points. Here the paths are

.. math::
    f(x, t) = \mu_t(x) + \phi(x, t)^\top w, \qquad
    (f \mid y)(x, t) = f(x, t) + \phi(x, t)^\top v, \qquad
    v = C^{-1}\Phi^\top\Sigma^{-1}(y - \mu(X) - \Phi w - \varepsilon),

:math:`w \sim N(0, I_F)`, :math:`\Sigma` the per-task noise of each training row, :math:`C = I + \Phi^\top
\Sigma^{-1}\Phi`: the weight-space update of :mod:`gprf.botorch.matheron` (no :math:`N\times N` matrix, no
:math:`S\times N` values). Everything model-specific is read through the model's public interface: ``forward`` (in
eval mode) gives the mean and the feature covariance of points with a task column, its task values remapped as the
model does; the likelihood's ``marginal`` adds each row's noise, which the root hand-off carries
(:func:`gprf.linalg.feature_root`); the input transform is the model's, the outcome transform its one-column
``Standardize`` (untransformed as one output whatever ``num_outputs``).

``draw_matheron_paths``, ``get_matheron_path_model`` and ``PathwiseThompsonSampling`` (for a single output task,
``output_tasks=[t]``) use it when the covariance is a gprf feature kernel, or GPyTorch's ``ProductKernel`` of one with
the task kernel (a ``ScaleKernel`` around the data kernel: the data root times the task covariance's exact root, by
:mod:`gprf.linalg.root_algebra`) (:mod:`gprf.botorch.dispatch`); every other ``MultiTaskGP`` keeps BoTorch's route,
unchanged.
"""

from __future__ import annotations

import torch
from botorch.models import MultiTaskGP
from botorch.sampling.pathwise.features import FeatureMap as PathwiseFeatureMap
from botorch.sampling.pathwise.paths import GeneralizedLinearPath
from botorch.sampling.pathwise.utils import (
    OutcomeUntransformer,
    get_input_transform,
    get_train_inputs,
    get_train_targets,
)
from torch import Size, Tensor
from torch.nn import Module

from gprf.botorch.features import check_pathwise_kernel
from gprf.botorch.frozen import frozen_copy
from gprf.botorch.matheron import feature_space_update_weights
from gprf.botorch.paths import SharedFeatureMatheronPath
from gprf.botorch.prior import path_weights
from gprf.kernels import is_feature_expression, root_columns
from gprf.linalg import covariance_root, feature_root
from gprf.settings import feature_chunk_size


def _check_eval(model: MultiTaskGP) -> None:
    # In train mode MultiTaskGP.forward applies the input transform itself (and a learnable transform would learn
    # from the path's inputs); the paths and the update read forward on points already transformed.
    if model.training:
        raise RuntimeError(
            "MultiTaskGP sample paths read the model's forward in eval mode; call model.eval() before drawing or "
            "evaluating them."
        )


class TaskRootFeatureMap(PathwiseFeatureMap):
    r"""BoTorch feature map :math:`\phi(x, t)`: the root of ``model.forward(x)``'s covariance at (transformed) points
    with the task column (amplitude included), so task values are remapped as the model remaps them."""

    def __init__(self, model: MultiTaskGP, num_inputs: int) -> None:
        super().__init__()
        self.model = model
        self.num_inputs = num_inputs
        self.input_transform = None
        self.output_transform = None

    def check_width(self, x: Tensor) -> None:
        if x.dim() < 2 or x.size(-1) != self.num_inputs:
            raise ValueError(
                f"Sample paths of this MultiTaskGP take points of shape (..., n, {self.num_inputs}): the width of its "
                f"training inputs, task column included; got {tuple(x.shape)}. Pass candidates with "
                f"{self.num_inputs} columns (e.g. append the target task's value as the task column)."
            )

    def forward(self, x: Tensor) -> Tensor:
        self.check_width(x)
        _check_eval(self.model)
        return covariance_root(self.model.forward, x).scaled_features()

    @property
    def num_outputs(self) -> int:
        return root_columns(self.model.covar_module)

    @property
    def batch_shape(self) -> Size:
        return self.model.covar_module.batch_shape


class TaskMean(Module):
    """The model's prior mean :math:`\\mu_t(x)` at (transformed) points with the task column: the bias of the prior
    paths (``forward``'s mean; its covariance stays lazy and is never evaluated here)."""

    def __init__(self, model: MultiTaskGP) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Tensor) -> Tensor:
        _check_eval(self.model)
        return self.model.forward(x).mean


def multitask_matheron_paths(model: MultiTaskGP, sample_shape: Size) -> SharedFeatureMatheronPath:
    r"""Posterior sample paths of a ``MultiTaskGP`` whose data kernel is a gprf feature kernel (module docstring).

    Args:
        model: A ``MultiTaskGP`` in eval mode whose ``covar_module`` is a gprf feature kernel (what the model builds
            from a gprf ``covar_module``), with ``HadamardGaussianLikelihood`` (per-task noise) or a fixed or
            homoscedastic Gaussian likelihood.
        sample_shape: Sizes of the sample dimensions.

    Returns:
        BoTorch's ``MatheronPath`` (a :class:`~gprf.botorch.paths.SharedFeatureMatheronPath`: one featurisation per
        evaluation); evaluated at points ``batch x n x (d + 1)`` with the task column it gives
        ``sample_shape x batch x n`` values on the model's outcome scale.
    """
    if not is_feature_expression(model.covar_module):
        raise TypeError(
            f"multitask_matheron_paths needs a MultiTaskGP whose covar_module is a gprf feature kernel (pass a gprf "
            f"data kernel as covar_module); got {type(model.covar_module).__name__}."
        )
    check_pathwise_kernel(model.covar_module)
    _check_eval(model)
    (points,) = get_train_inputs(model, transformed=True)
    targets = get_train_targets(model, transformed=True)
    with feature_chunk_size.chunked(root_columns(model.covar_module), points.device):
        prior = model.forward(points)
        # The likelihood's marginal adds each row's noise (per task for HadamardGaussianLikelihood), read back by the
        # one decoder together with the root.
        root = feature_root(model.likelihood.marginal(prior, points).lazy_covariance_matrix)
    if root is None or root.noise is None:
        raise TypeError(
            f"The covariance of this MultiTaskGP with its {type(model.likelihood).__name__} has no feature root with "
            "noise; pathwise sampling in weight space needs a Gaussian likelihood."
        )
    # The paths read the model as it is now, whatever happens to it later (gprf.botorch.frozen): one frozen copy.
    frozen = frozen_copy(model)
    feature_map = TaskRootFeatureMap(frozen, num_inputs=points.size(-1))
    batch_shape = model.covar_module.batch_shape
    weight_shape = sample_shape + batch_shape + (feature_map.num_outputs,)
    prior_weights = path_weights(weight_shape, batch_ndim=len(batch_shape)).to(points)
    with torch.no_grad():
        update_weights = feature_space_update_weights(root, targets - prior.mean, prior_weights).to(points.dtype)
    input_transform = get_input_transform(frozen)
    prior_paths = GeneralizedLinearPath(
        feature_map=feature_map, weight=prior_weights, bias_module=TaskMean(frozen), input_transform=input_transform
    )
    update_paths = GeneralizedLinearPath(
        feature_map=feature_map, weight=update_weights, input_transform=input_transform
    )
    transform = getattr(frozen, "outcome_transform", None)
    # MultiTaskGP's targets are one column whatever num_outputs: untransform the path values as one output.
    output_transform = None if transform is None else OutcomeUntransformer(transform=transform, num_outputs=1)
    return SharedFeatureMatheronPath(
        prior_paths=prior_paths, update_paths=update_paths, output_transform=output_transform
    )
