"""gprf's entries in BoTorch's pathwise dispatchers: the one place where gprf registers anything with BoTorch.

Every other module of :mod:`gprf.botorch` only defines functions and classes; importing this one adds the entries
below. BoTorch's dispatchers choose a handler by type, and the types gprf serves are mostly BoTorch's own (a plain
``SingleTaskGP`` or ``MultiTaskGP`` with a gprf kernel, a ``ScaleKernel`` around one). So each entry for a BoTorch
type holds the handler BoTorch had registered for it, found through the dispatcher's public lookup
(``Dispatcher.dispatch``) when this module is imported, before any entry is added (the order of the entries does not
matter), and hands it every call that is not gprf's — no argument changed, no random number drawn — so models with
other kernels get bit-identical results with and without gprf. Nothing else of BoTorch's is replaced.

=====================  ===================================  ======================================================
dispatcher             types                                gprf's handler, when the covariance is a gprf kernel
=====================  ===================================  ======================================================
``GenKernelFeatures``  gprf's ``FeatureKernel``             :func:`~gprf.botorch.features.gen_root_features`
``GenKernelFeatures``  ``ScaleKernel``                      the same, for the whole module (also around GPyTorch's
                                                            sums and products of gprf kernels)
prior sampler          ``ExactGP``                          :func:`~gprf.botorch.prior.kernel_feature_paths`
Gaussian update        ``ExactGP``, Gaussian likelihoods    :func:`~gprf.botorch.weight_space_update` (BoTorch's
                                                            dense update, frozen, when given ``scale_tril``)
Matheron paths         ``ExactGP``                          :func:`~gprf.botorch.weight_space_matheron_paths`
Matheron paths         ``MultiTaskGP``                      :func:`~gprf.botorch.multitask_matheron_paths`
=====================  ===================================  ======================================================

"A gprf kernel" is any covariance module that evaluates to a feature root (:func:`~gprf.kernels.is_feature_expression`):
a gprf kernel, alone or in ``ScaleKernel``, and GPyTorch's ``AdditiveKernel`` and ``ProductKernel`` of them (what
``ScaleKernel(k1) + ScaleKernel(k2)`` and ``MultiTaskGP`` with a scaled data kernel build). BoTorch has no
``GenKernelFeatures`` entry for those two classes, and gprf adds none (BoTorch's own prior sampler is not asked for gprf
models). The two Matheron entries share one guard (:func:`takes_weight_space_route`): gprf's route needs a Gaussian
likelihood and BoTorch's default prior sampler and update, since a caller who passes another one asks for BoTorch's
route.
"""

from __future__ import annotations

from typing import Any

from botorch.models import MultiTaskGP
from botorch.sampling.pathwise.features import FeatureMap as PathwiseFeatureMap
from botorch.sampling.pathwise.features.generators import GenKernelFeatures
from botorch.sampling.pathwise.paths import GeneralizedLinearPath
from botorch.sampling.pathwise.posterior_samplers import DrawMatheronPaths, MatheronPath
from botorch.sampling.pathwise.prior_samplers import DrawKernelFeaturePaths, draw_kernel_feature_paths
from botorch.sampling.pathwise.update_strategies import GaussianUpdate
from botorch.sampling.pathwise.update_strategies import gaussian_update as botorch_default_update
from gpytorch.kernels import ScaleKernel
from gpytorch.likelihoods import (
    FixedNoiseGaussianLikelihood,
    GaussianLikelihood,
    HadamardGaussianLikelihood,
    Likelihood,
)
from gpytorch.models import ExactGP
from torch import Size

from gprf.botorch.features import gen_root_features
from gprf.botorch.frozen import frozen_copy
from gprf.botorch.matheron import weight_space_matheron_paths
from gprf.botorch.multitask import multitask_matheron_paths
from gprf.botorch.prior import kernel_feature_paths
from gprf.botorch.update import weight_space_update
from gprf.kernels import FeatureKernel, is_feature_expression

# BoTorch's handlers for the types below, all found before gprf adds an entry (MultiTaskGP is an ExactGP: looked up
# after gprf's ExactGP entry, its handler would be gprf's).
botorch_scale_kernel_features = GenKernelFeatures.dispatch(ScaleKernel)
botorch_prior_paths = DrawKernelFeaturePaths.dispatch(ExactGP)
botorch_gaussian_update = GaussianUpdate.dispatch(ExactGP, GaussianLikelihood)
botorch_matheron_paths = DrawMatheronPaths.dispatch(ExactGP)
botorch_multitask_matheron_paths = DrawMatheronPaths.dispatch(MultiTaskGP)

EXACT_GP_LIKELIHOODS = (GaussianLikelihood, FixedNoiseGaussianLikelihood)
MULTITASK_LIKELIHOODS = (*EXACT_GP_LIKELIHOODS, HadamardGaussianLikelihood)


def takes_weight_space_route(
    model: ExactGP, likelihoods: tuple[type[Likelihood], ...], prior_sampler: Any, update_strategy: Any
) -> bool:
    """Whether ``draw_matheron_paths`` for ``model`` goes to gprf's weight-space route: a gprf feature kernel as the
    covariance, a likelihood of ``likelihoods`` (those whose noise the route reads), and BoTorch's default prior
    sampler and update."""
    return (
        is_feature_expression(model.covar_module)
        and isinstance(model.likelihood, likelihoods)
        and prior_sampler is draw_kernel_feature_paths
        and update_strategy is botorch_default_update
    )


GenKernelFeatures.register(FeatureKernel)(gen_root_features)


@GenKernelFeatures.register(ScaleKernel)
def gen_scale_kernel_features(kernel: ScaleKernel, **kwargs: Any) -> PathwiseFeatureMap:
    """:func:`~gprf.botorch.features.gen_root_features` for a ``ScaleKernel`` around a gprf kernel; BoTorch's
    generator for every other ``ScaleKernel``. (BoTorch's generator chains a column selection for the wrapper's
    ``active_dims`` and an outputscale transform onto the map of the inner kernel; the root of the whole module needs
    neither.)"""
    if is_feature_expression(kernel):
        return gen_root_features(kernel, **kwargs)
    return botorch_scale_kernel_features(kernel, **kwargs)


@DrawKernelFeaturePaths.register(ExactGP)
def draw_prior_paths(model: ExactGP, **kwargs: Any) -> GeneralizedLinearPath:
    """:func:`~gprf.botorch.prior.kernel_feature_paths` (the kernel's own features, unbiased weights, frozen model
    parts) for gprf kernels; BoTorch's prior sampler for every other model."""
    if not is_feature_expression(model.covar_module):
        return botorch_prior_paths(model, **kwargs)
    return kernel_feature_paths(model, **kwargs)


@GaussianUpdate.register(ExactGP, EXACT_GP_LIKELIHOODS)
def gaussian_update(
    model: ExactGP, likelihood: Likelihood, *, scale_tril: Any = None, **kwargs: Any
) -> GeneralizedLinearPath:
    """:func:`~gprf.botorch.weight_space_update` for gprf kernels; BoTorch's dense update for every other model
    and whenever the caller supplies a Cholesky factor of :math:`K + \\Sigma` (``scale_tril``) — for a gprf kernel
    as a frozen copy (:mod:`gprf.botorch.frozen`), since BoTorch's update path evaluates the live kernel."""
    if not is_feature_expression(model.covar_module):
        return botorch_gaussian_update(model, likelihood, scale_tril=scale_tril, **kwargs)
    if scale_tril is None:
        return weight_space_update(model, likelihood, **kwargs)
    return frozen_copy(botorch_gaussian_update(model, likelihood, scale_tril=scale_tril, **kwargs))


@DrawMatheronPaths.register(ExactGP)
def draw_matheron_paths(
    model: ExactGP, *, sample_shape: Size, prior_sampler: Any, update_strategy: Any
) -> MatheronPath:
    """:func:`~gprf.botorch.weight_space_matheron_paths` (no :math:`S\\times N` values) where
    :func:`takes_weight_space_route`; BoTorch's route for every other model and caller."""
    if takes_weight_space_route(model, EXACT_GP_LIKELIHOODS, prior_sampler, update_strategy):
        return weight_space_matheron_paths(model, sample_shape)
    return botorch_matheron_paths(
        model, sample_shape=sample_shape, prior_sampler=prior_sampler, update_strategy=update_strategy
    )


@DrawMatheronPaths.register(MultiTaskGP)
def draw_multitask_matheron_paths(
    model: MultiTaskGP, *, sample_shape: Size, prior_sampler: Any, update_strategy: Any
) -> MatheronPath:
    """:func:`~gprf.botorch.multitask_matheron_paths` where :func:`takes_weight_space_route` (per-task noise
    included); BoTorch's route for every other ``MultiTaskGP`` and caller."""
    if takes_weight_space_route(model, MULTITASK_LIKELIHOODS, prior_sampler, update_strategy):
        return multitask_matheron_paths(model, sample_shape)
    return botorch_multitask_matheron_paths(
        model, sample_shape=sample_shape, prior_sampler=prior_sampler, update_strategy=update_strategy
    )
