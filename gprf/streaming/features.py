"""The feature root of a model's covariance module, and the fingerprint that identifies its features."""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from gprf.kernels.feature_sum import scaled_features
from gprf.streaming.statistics import probe_inputs


def model_root(covar_module: Kernel, x: Tensor) -> Tensor:
    """The feature root ``(..., n, F)`` that ``covar_module(x)`` is built from (amplitudes folded in).

    Selects ``active_dims`` as ``Kernel.__call__`` does: once, with the outermost kernel's dimensions
    (``ScaleKernel`` copies those of the kernel it wraps).
    """
    if covar_module.active_dims is not None:
        x = x.index_select(-1, covar_module.active_dims)
    return scaled_features(covar_module, x)


def feature_fingerprint(covar_module: Kernel, input_dim: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """The float64 root ``(*batch, F)`` at ``probe_inputs(input_dim)``: equal for equal
    random draws and hyperparameters, different otherwise."""
    with torch.no_grad():
        return model_root(covar_module, probe_inputs(input_dim, dtype, device))[..., 0, :].to(torch.float64)
