"""gprf's entries in BoTorch's pathwise dispatchers, for every ``ExactGP`` whose covariance is a gprf kernel.

The kernel-feature generator is registered for gprf's own type, and for ``ScaleKernel`` with the same delegation as
below (:mod:`gprf.botorch.features`). The prior sampler
and the Gaussian update dispatch on the *model* type, and a plain ``SingleTaskGP`` with a gprf kernel is a BoTorch
type; for those, gprf takes the handler BoTorch had registered through the dispatcher's public lookup
(``Dispatcher.dispatch``) before adding its own, and hands every call whose covariance is not a gprf feature
kernel to it unchanged — no argument changed, no random number drawn — so models with other kernels get
bit-identical paths with and without gprf. Nothing else of BoTorch's is replaced.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from botorch.sampling.pathwise.paths import GeneralizedLinearPath
from botorch.sampling.pathwise.posterior_samplers import DrawMatheronPaths, MatheronPath
from botorch.sampling.pathwise.prior_samplers import DrawKernelFeaturePaths, draw_kernel_feature_paths
from botorch.sampling.pathwise.update_strategies import GaussianUpdate
from botorch.sampling.pathwise.update_strategies import gaussian_update as botorch_default_update
from botorch.sampling.pathwise.utils import get_train_inputs
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, GaussianLikelihood, Likelihood
from gpytorch.models import ExactGP
from torch import Size

from gprf.botorch.features import KernelRootFeatureMap
from gprf.botorch.frozen import freeze_model_parts, frozen_copy
from gprf.botorch.matheron import weight_space_matheron_paths
from gprf.botorch.prior import broadcast_over_data_batch, path_weights
from gprf.botorch.update import weight_space_update
from gprf.kernels import is_feature_kernel

# The handlers BoTorch registered for these signatures, found before gprf adds its own entries.
botorch_prior_paths = DrawKernelFeaturePaths.dispatch(ExactGP)
botorch_gaussian_update = GaussianUpdate.dispatch(ExactGP, GaussianLikelihood)
botorch_matheron_paths = DrawMatheronPaths.dispatch(ExactGP)


@DrawKernelFeaturePaths.register(ExactGP)
def draw_prior_paths(model: ExactGP, **kwargs: Any) -> GeneralizedLinearPath:
    """Prior paths from the kernel's own features (the whole covariance module's root) and unbiased weights
    (:func:`~gprf.botorch.prior.path_weights`, broadcast over any batch dimension the training data has beyond the
    kernel's) for gprf kernels, holding frozen copies of the model parts they read (:mod:`gprf.botorch.frozen`);
    BoTorch's sampler for every other model."""
    if not is_feature_kernel(model.covar_module):
        return botorch_prior_paths(model, **kwargs)
    (points,) = get_train_inputs(model, transformed=True)
    kwargs.setdefault("map_generator", partial(covariance_root_features, num_inputs=points.size(-1)))
    if kwargs.get("weight_generator") is None:
        kwargs["weight_generator"] = partial(path_weights, batch_ndim=len(model.covar_module.batch_shape))
    paths = botorch_prior_paths(model, **kwargs)
    paths.weight = broadcast_over_data_batch(paths.weight, model.covar_module.batch_shape, points.shape[:-2])
    return freeze_model_parts(paths)


def covariance_root_features(kernel: Any, num_inputs: int, **_: Any) -> KernelRootFeatureMap:
    """The ``map_generator`` of a whole covariance module: its root, refusing points whose width is not that of the
    model's (transformed) training inputs, ``num_inputs`` (BoTorch's own ``num_inputs`` is the untransformed width,
    and the requested feature count is ignored: see :func:`~gprf.botorch.features.gen_root_features`)."""
    return KernelRootFeatureMap(kernel, num_inputs=num_inputs)


@GaussianUpdate.register(ExactGP, (GaussianLikelihood, FixedNoiseGaussianLikelihood))
def gaussian_update(
    model: ExactGP, likelihood: Likelihood, *, scale_tril: Any = None, **kwargs: Any
) -> GeneralizedLinearPath:
    """:func:`~gprf.botorch.weight_space_update` for gprf kernels; BoTorch's dense update for every other model
    and whenever the caller supplies a Cholesky factor of :math:`K + \\Sigma` (``scale_tril``) — for a gprf kernel
    as a frozen copy (:mod:`gprf.botorch.frozen`), since BoTorch's update path evaluates the live kernel."""
    if not is_feature_kernel(model.covar_module):
        return botorch_gaussian_update(model, likelihood, scale_tril=scale_tril, **kwargs)
    if scale_tril is None:
        return weight_space_update(model, likelihood, **kwargs)
    return frozen_copy(botorch_gaussian_update(model, likelihood, scale_tril=scale_tril, **kwargs))


@DrawMatheronPaths.register(ExactGP)
def draw_matheron_paths(
    model: ExactGP, *, sample_shape: Size, prior_sampler: Any, update_strategy: Any
) -> MatheronPath:
    """:func:`~gprf.botorch.matheron.weight_space_matheron_paths` (no :math:`S\times N` values) for gprf kernels with
    a Gaussian likelihood and BoTorch's default prior sampler and update; BoTorch's route for every other model
    and whenever the caller chooses another sampler or update strategy."""
    if (
        is_feature_kernel(model.covar_module)
        and isinstance(model.likelihood, (GaussianLikelihood, FixedNoiseGaussianLikelihood))
        and prior_sampler is draw_kernel_feature_paths
        and update_strategy is botorch_default_update
    ):
        return weight_space_matheron_paths(model, sample_shape)
    return botorch_matheron_paths(
        model, sample_shape=sample_shape, prior_sampler=prior_sampler, update_strategy=update_strategy
    )
