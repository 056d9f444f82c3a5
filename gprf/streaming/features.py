"""The feature root of a model's covariance module, and the fingerprint that identifies its features."""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from gprf.linalg import FeatureRoot, feature_root
from gprf.streaming.statistics import probe_inputs


def model_root(covar_module: Kernel, x: Tensor) -> FeatureRoot:
    """The hand-off of ``covar_module(x)``: GPyTorch selects ``active_dims``, the decoder reads root and amplitude."""
    root = feature_root(covar_module(x))
    if root is None:
        raise TypeError(
            f"{type(covar_module).__name__} did not evaluate to a feature root; streaming needs a gprf random-feature "
            "kernel (optionally in ScaleKernel or a gprf feature sum)."
        )
    return root


def feature_fingerprint(covar_module: Kernel, input_dim: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """The float64 root ``(*batch, F)`` (amplitude included) at ``probe_inputs(input_dim)``: equal for equal
    random draws and hyperparameters, different otherwise."""
    with torch.no_grad():
        root = model_root(covar_module, probe_inputs(input_dim, dtype, device))
        return root.scaled_features()[..., 0, :].to(torch.float64)
