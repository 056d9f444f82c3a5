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

at :math:`O(NF^2 + F^3 + SNF)` with the :math:`F\times F` capacitance from :func:`gprf.linalg.factor_capacitance`
(as in :class:`~gprf.prediction.FeatureSpacePredictionStrategy`). Pathwise conditioning by Matheron's rule is
that of Wilson et al. (2020, 2021).

References:
    * J. T. Wilson, V. Borovitskiy, A. Terenin, P. Mostowsky, M. P. Deisenroth. *Efficiently Sampling Functions from
      Gaussian Process Posteriors.* International Conference on Machine Learning (ICML), 2020.
    * J. T. Wilson, V. Borovitskiy, A. Terenin, P. Mostowsky, M. P. Deisenroth. *Pathwise Conditioning of Gaussian
      Processes.* Journal of Machine Learning Research 22, 2021.
"""

from __future__ import annotations

import torch
from botorch.sampling.pathwise.paths import GeneralizedLinearPath
from botorch.sampling.pathwise.utils import get_input_transform, get_train_inputs, get_train_targets
from botorch.utils.transforms import is_ensemble
from gpytorch.likelihoods import Likelihood
from gpytorch.models import ExactGP
from linear_operator.operators import LinearOperator, ZeroLinearOperator
from torch import Tensor
from torch.nn import Module

from gprf.botorch.features import KernelRootFeatureMap
from gprf.botorch.frozen import frozen_copy
from gprf.kernels import is_feature_expression
from gprf.linalg import covariance_root
from gprf.settings import factor_dtype


def check_update_kernel(kernel: Module) -> None:
    """Raise unless ``kernel`` (a model's ``covar_module``) is a gprf feature kernel, optionally in ``ScaleKernel``."""
    if not is_feature_expression(kernel):
        raise TypeError(
            f"The weight-space update needs a gprf random-feature covar_module (optionally in ScaleKernel); "
            f"{type(kernel).__name__} has no finite feature map."
        )


def observation_noise(
    likelihood: Likelihood, points: Tensor, noise_covariance: Tensor | LinearOperator | None = None
) -> Tensor:
    """The observation-noise variances ``(..., N)`` at ``points`` (the likelihood's unless ``noise_covariance``, a
    diagonal covariance, is given); a clear error for noise-free covariances."""
    if noise_covariance is None:
        noise_covariance = likelihood.noise_covar(shape=points.shape[:-1])
    if isinstance(noise_covariance, ZeroLinearOperator):
        raise ValueError(
            "The weight-space update needs positive observation noise (the capacitance I + Phi^T Sigma^-1 Phi "
            "divides by it); give the likelihood a noise floor."
        )
    return noise_covariance.diagonal(dim1=-2, dim2=-1)


def weight_space_update(
    model: ExactGP,
    likelihood: Likelihood,
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
    check_update_kernel(kernel)
    if points is None:
        (points,) = get_train_inputs(model, transformed=True)
    if target_values is None:
        target_values = get_train_targets(model, transformed=True)
    dtype = factor_dtype.value()
    with torch.no_grad():  # a drawn path keeps its values (gprf.botorch.frozen)
        root = covariance_root(kernel, points)
        phi = root.features.to(dtype)  # batch x N x F
        noise = observation_noise(likelihood, points, noise_covariance).to(dtype).expand(phi.shape[:-1])

        noise_draws = noise.sqrt() * torch.randn_like(sample_values, dtype=dtype)
        errors = target_values.to(dtype) - sample_values.to(dtype) - noise_draws

        # Solve with the samples as columns: C^{-1} Phi^T Sigma^{-1} E for E of shape batch x N x S.
        batch_ndim = phi.dim() - 2
        sample_shape = errors.shape[: errors.dim() - batch_ndim - 1]
        columns = errors.reshape(-1, *errors.shape[-batch_ndim - 1 :]).movedim(0, -1)  # batch x N x S
        columns = columns.expand(*phi.shape[:-1], columns.size(-1))
        factor, projection = root.with_noise(noise).factor(columns, features=phi)
        weight = factor.solve(projection)  # batch x F x S
        weight = weight.movedim(-1, 0).reshape(*sample_shape, *phi.shape[:-2], phi.size(-1))

    feature_map = KernelRootFeatureMap(kernel, num_inputs=points.size(-1))
    feature_map.input_transform = frozen_copy(get_input_transform(model))
    return GeneralizedLinearPath(
        feature_map=feature_map, weight=weight.to(sample_values.dtype), is_ensemble=is_ensemble(model)
    )
