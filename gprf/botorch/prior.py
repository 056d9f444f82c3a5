r"""Prior sample paths :math:`f(x) = \phi(x)^\top w` with unbiased weights for batched (multi-output) models.

BoTorch draws the path weights ``sample_shape x batch_shape x F`` as ``S * B`` consecutive scrambled-Sobol
normal points reshaped to ``(S, B, F)``, so batch member ``b`` receives every ``B``-th point of the sequence.
Subsequences of a Sobol sequence with a stride are not balanced: with ``B = 2`` the second weight of
every path of output 0 is positive (its sample mean is :math:`E|z| = 0.80` instead of 0), which biases the
prior and hence the posterior paths of every multi-output model. gprf draws one Sobol point of dimension
``B * F`` per path instead (iid normals beyond Sobol's 21201 dimensions), which keeps each weight a
standard normal and the paths independent across outputs.
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
