r"""Weight-space pathwise update for GPs whose covariance is a gprf feature kernel.

Matheron's rule turns a prior sample path :math:`f` into a posterior one,

.. math::
    (f \mid y)(\cdot) = f(\cdot) + k(\cdot, X)\,(K + \Sigma)^{-1}(y - f(X) - \varepsilon),
    \qquad \varepsilon \sim N(0, \Sigma).

BoTorch evaluates the update with a dense :math:`N\times N` Cholesky factor that it broadcasts over the
sample dimension (``O(N^3)`` time and ``O(S N^2)`` memory). With :math:`K = \Phi\Phi^\top` the
push-through identity gives the same update in weight space,

.. math::
    (f \mid y)(\cdot) = f(\cdot) + \phi(\cdot)^\top v, \qquad
    v = (I + \Phi^\top\Sigma^{-1}\Phi)^{-1}\Phi^\top\Sigma^{-1}(y - f(X) - \varepsilon),

at :math:`O(NF^2 + F^3 + SNF)` with the :math:`F\times F` capacitance formed and factored in float64 (as in
:class:`~gprf.prediction.FeatureSpacePredictionStrategy`). Wilson et al. (2020, 2021) "Efficiently
sampling functions from Gaussian process posteriors" / "Pathwise conditioning of Gaussian processes".
"""

from __future__ import annotations

from typing import Any

import torch
from botorch.sampling.pathwise import update_strategies
from botorch.sampling.pathwise.features import gen_kernel_features
from botorch.sampling.pathwise.paths import GeneralizedLinearPath
from botorch.sampling.pathwise.update_strategies import GaussianUpdate
from botorch.sampling.pathwise.utils import get_input_transform, get_train_inputs, get_train_targets
from botorch.utils.transforms import is_ensemble
from gpytorch.likelihoods import _GaussianLikelihoodBase
from gpytorch.models import ExactGP
from linear_operator.operators import LinearOperator, ZeroLinearOperator
from torch import Tensor

from gprf.kernels.feature_sum import is_feature_kernel, unwrap_scale_kernel
from gprf.prediction.capacitance import CapacitanceFactor

# BoTorch's own update for ExactGP models; every model whose covariance is not a gprf feature kernel keeps it.
_botorch_exact_update = update_strategies._gaussian_update_ExactGP


def weight_space_update(
    model: ExactGP,
    likelihood: _GaussianLikelihoodBase,
    *,
    sample_values: Tensor,
    target_values: Tensor | None = None,
    points: Tensor | None = None,
    noise_covariance: Tensor | LinearOperator | None = None,
) -> GeneralizedLinearPath:
    r"""The Gaussian pathwise update of ``model`` computed in weight space (see the module docstring).

    Args:
        model: An ``ExactGP`` (e.g. BoTorch's ``SingleTaskGP``) whose ``covar_module`` is a gprf feature
            kernel, optionally inside ``ScaleKernel``.
        likelihood: Its Gaussian likelihood (homoscedastic, fixed or batched noise).
        sample_values: Prior path values :math:`f(X)` at the training inputs, ``sample_shape x batch x N``.
        target_values: Training targets (default: the model's, in the transformed space).
        points: Training inputs (default: the model's, transformed).
        noise_covariance: Observation-noise covariance (default: the likelihood's at ``points``); must be
            diagonal.

    Returns:
        A path :math:`x \mapsto \phi(x)^\top v` with weights ``v`` of shape ``sample_shape x batch x F``.
    """
    kernel = model.covar_module
    if not is_feature_kernel(kernel):
        raise TypeError(
            f"weight_space_update needs a gprf random-feature covar_module (optionally in ScaleKernel); "
            f"{type(kernel).__name__} has no finite feature map."
        )
    if points is None:
        (points,) = get_train_inputs(model, transformed=True)
    if target_values is None:
        target_values = get_train_targets(model, transformed=True)
    if noise_covariance is None:
        noise_covariance = likelihood.noise_covar(shape=points.shape[:-1])
    if isinstance(noise_covariance, ZeroLinearOperator):
        raise ValueError(
            "The weight-space update needs positive observation noise (the capacitance I + Phi^T Sigma^-1 Phi "
            "divides by it); give the likelihood a noise floor."
        )
    noise = noise_covariance.diagonal(dim1=-2, dim2=-1)

    feature_map = gen_kernel_features(kernel, num_inputs=points.shape[-1], num_outputs=unwrap_scale_kernel(kernel).num_features)
    phi = feature_map(points).to(torch.float64)  # batch x N x F
    noise = noise.to(torch.float64).expand(phi.shape[:-1])
    factor = CapacitanceFactor.from_features(phi, noise)

    observation_noise = noise.sqrt() * torch.randn_like(sample_values, dtype=torch.float64)
    errors = target_values.to(torch.float64) - sample_values.to(torch.float64) - observation_noise

    # Solve with the samples as columns: C^{-1} Phi^T Sigma^{-1} E for E of shape batch x N x S.
    batch_ndim = phi.dim() - 2
    sample_shape = errors.shape[: errors.dim() - batch_ndim - 1]
    columns = errors.reshape(-1, *errors.shape[-batch_ndim - 1 :]).movedim(0, -1)  # batch x N x S
    columns = columns.expand(*phi.shape[:-1], columns.size(-1))
    weight = factor.solve(phi.mT @ (columns / noise.unsqueeze(-1)))  # batch x F x S
    weight = weight.movedim(-1, 0).reshape(*sample_shape, *phi.shape[:-2], phi.size(-1))

    feature_map.input_transform = get_input_transform(model)
    return GeneralizedLinearPath(
        feature_map=feature_map, weight=weight.to(sample_values.dtype), is_ensemble=is_ensemble(model)
    )


@GaussianUpdate.register(ExactGP, _GaussianLikelihoodBase)
def _gaussian_update_exact_gp(
    model: ExactGP, likelihood: _GaussianLikelihoodBase, *, scale_tril: Any = None, **kwargs: Any
) -> GeneralizedLinearPath:
    # A caller-supplied Cholesky factor of K + Sigma belongs to BoTorch's dense route; honour it there.
    if scale_tril is None and is_feature_kernel(model.covar_module):
        return weight_space_update(model, likelihood, **kwargs)
    return _botorch_exact_update(model, likelihood, scale_tril=scale_tril, **kwargs)
