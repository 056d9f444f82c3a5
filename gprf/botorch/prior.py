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
"""

from __future__ import annotations

from math import prod

import torch
from botorch.utils.sampling import draw_sobol_normal_samples
from torch import Size, Tensor
from torch.quasirandom import SobolEngine


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
