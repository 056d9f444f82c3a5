r"""Prior sample paths :math:`f(x) = \phi(x)^\top w` with unbiased weights for batched (multi-output) models.

BoTorch draws the path weights ``sample_shape x batch_shape x F`` as ``S * B`` consecutive scrambled-Sobol
normal points reshaped to ``(S, B, F)``, so batch member ``b`` receives every ``B``-th point of the sequence.
Subsequences of a Sobol sequence with a stride are not balanced: with ``B = 2`` the second weight of
every path of output 0 is positive (its sample mean is :math:`E|z| = 0.80` instead of 0), which biases the
prior and hence the posterior paths of every multi-output model. gprf draws one Sobol point of dimension
``B * F`` per path instead (iid normals beyond Sobol's 21201 dimensions), which keeps each weight a
standard normal and the paths independent across outputs. For training data with batch dimensions beyond the
kernel's (a fantasy model's fantasies), the weights get singleton dimensions there
(:func:`broadcast_over_data_batch`), so that every batch member conditions the same prior draw on its own data.

:func:`kernel_feature_paths` builds gprf's prior paths, for BoTorch's prior sampler and for gprf's Matheron routes
alike.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod

import torch
from botorch.sampling.pathwise.features import FeatureMap as PathwiseFeatureMap
from botorch.sampling.pathwise.paths import GeneralizedLinearPath
from botorch.sampling.pathwise.utils import get_input_transform, get_output_transform, get_train_inputs
from botorch.utils.sampling import draw_sobol_normal_samples
from botorch.utils.transforms import is_ensemble
from gpytorch.models import ExactGP
from torch import Size, Tensor
from torch.quasirandom import SobolEngine

from gprf.botorch.features import KernelRootFeatureMap
from gprf.botorch.frozen import frozen_copy


def check_sample_shape(sample_shape: object) -> Size:
    """``sample_shape`` as a ``torch.Size`` of non-negative sizes; a ``TypeError`` naming the fix otherwise (an int
    would fail deep inside the path construction)."""
    if not isinstance(sample_shape, (Size, tuple, list)) or not all(
        isinstance(size, int) and not isinstance(size, bool) and size >= 0 for size in sample_shape
    ):
        raise TypeError(
            f"sample_shape must be a torch.Size of sample sizes, e.g. torch.Size([{sample_shape!r}]), got "
            f"{type(sample_shape).__name__} {sample_shape!r}."
        )
    return Size(sample_shape)


def path_weights(shape: Size, batch_ndim: int) -> Tensor:
    """Standard normal weights of shape ``sample_shape x batch_shape x F``, one QMC point per sample path.

    Args:
        shape: ``sample_shape + batch_shape + (F,)``.
        batch_ndim: ``len(batch_shape)`` (the model's batch dimensions, e.g. ``[m]`` outputs).
    """
    sample_shape = shape[: len(shape) - batch_ndim - 1]
    num_paths, dim = prod(sample_shape), prod(shape[len(sample_shape) :])
    if dim > SobolEngine.MAXDIM:
        return torch.randn(shape, dtype=torch.float64)
    return draw_sobol_normal_samples(n=num_paths, d=dim, dtype=torch.float64).reshape(shape)


def broadcast_over_data_batch(weight: Tensor, kernel_batch: Size, data_batch: Size) -> Tensor:
    """Prior weights ``sample_shape x kernel_batch x F`` with a singleton dimension for each leading batch dimension
    the training data has beyond the kernel's (``data_batch``: a fantasy model's fantasies, or batched data with an
    unbatched kernel): every batch member then conditions the same prior draw on its own data, and update weights
    ``sample_shape x data_batch x F`` broadcast against them."""
    extra = len(torch.broadcast_shapes(data_batch, kernel_batch)) - len(kernel_batch)
    sample_ndim = weight.dim() - len(kernel_batch) - 1
    return weight.reshape(*weight.shape[:sample_ndim], *(1,) * extra, *weight.shape[sample_ndim:])


def kernel_feature_paths(
    model: ExactGP,
    sample_shape: Size,
    *,
    num_features: int = 1024,
    map_generator: Callable[..., PathwiseFeatureMap] | None = None,
    weight_generator: Callable[[Size], Tensor] | None = None,
    untransform_outcomes: bool = True,
) -> GeneralizedLinearPath:
    r"""Prior sample paths :math:`x \mapsto \mu(z) + \tilde\phi(z)^\top w`, :math:`z` the transformed ``x``, of an
    ``ExactGP`` whose covariance is a gprf feature kernel (optionally in ``ScaleKernel``).

    :math:`\tilde\phi` is the whole covariance module's root (:class:`~gprf.botorch.KernelRootFeatureMap`, refusing
    points whose width is not that of the model's transformed training inputs), :math:`w` comes from
    :func:`~gprf.botorch.path_weights` (broadcast over any batch dimension the training data has beyond the kernel's:
    :func:`broadcast_over_data_batch`), and the path holds frozen copies of the model parts it reads
    (:mod:`gprf.botorch.frozen`): its mean :math:`\mu`, input transform and, with ``untransform_outcomes``, outcome
    untransform. Nothing else of the model is evaluated; the only random numbers drawn are the weights.

    Args:
        model: The model.
        sample_shape: Sizes of the sample dimensions.
        num_features, map_generator, weight_generator: BoTorch's options of ``draw_kernel_feature_paths``: a
            caller's ``map_generator`` is called as BoTorch calls it (``kernel``, ``num_inputs`` the untransformed
            width, ``num_outputs=num_features``), and ``weight_generator(shape)`` replaces
            :func:`~gprf.botorch.path_weights`. ``num_features`` is otherwise ignored: the kernel's own features fix the
            model's covariance.
        untransform_outcomes: Whether the paths give values on the outcome scale (the model's outcome untransform);
            ``False`` leaves them in the model's transformed space, for the prior part of a Matheron path.

    Returns:
        BoTorch's ``GeneralizedLinearPath`` with weights ``sample_shape x batch x F``.
    """
    kernel = model.covar_module
    (points,) = get_train_inputs(model, transformed=True)
    if map_generator is None:
        feature_map = KernelRootFeatureMap(kernel, num_inputs=points.size(-1))
    else:
        (inputs,) = get_train_inputs(model, transformed=False)
        feature_map = map_generator(kernel=kernel, num_inputs=inputs.size(-1), num_outputs=num_features)
    weight_shape = sample_shape + kernel.batch_shape + (feature_map.num_outputs,)
    if weight_generator is None:
        weight = path_weights(weight_shape, batch_ndim=len(kernel.batch_shape))
    else:
        weight = weight_generator(weight_shape)
    weight = weight.to(device=kernel.device, dtype=kernel.dtype)
    return GeneralizedLinearPath(
        feature_map=feature_map,
        weight=broadcast_over_data_batch(weight, kernel.batch_shape, points.shape[:-2]),
        bias_module=frozen_copy(model.mean_module),
        input_transform=frozen_copy(get_input_transform(model)),
        output_transform=frozen_copy(get_output_transform(model)) if untransform_outcomes else None,
        is_ensemble=is_ensemble(model),
    )
