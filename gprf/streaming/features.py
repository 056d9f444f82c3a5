"""What the streaming statistics read from a model's modules besides the feature root of its covariance module
(:func:`gprf.linalg.covariance_root`): the noise its likelihood adds, and the fingerprint that identifies the model."""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from gpytorch.likelihoods import FixedNoiseGaussianLikelihood, _GaussianLikelihoodBase
from gpytorch.means import Mean
from torch import Tensor

from gprf.linalg import covariance_root
from gprf.streaming.statistics import probe_inputs


def likelihood_noise(likelihood: _GaussianLikelihoodBase, x: Tensor, shape: torch.Size) -> Tensor | None:
    """The noise variances ``(..., n)`` a Gaussian likelihood itself adds at ``x`` for a prior of shape ``shape``:
    exactly what its marginal adds; for ``FixedNoiseGaussianLikelihood`` only its learned second noise (``None``
    without one: the fixed noise comes with the data)."""
    if isinstance(likelihood, FixedNoiseGaussianLikelihood):
        second = likelihood.second_noise_covar
        return None if second is None else second(x).diagonal(dim1=-2, dim2=-1)
    return likelihood._shaped_noise_covar(shape, x).diagonal(dim1=-2, dim2=-1)


def model_fingerprint(
    covar_module: Kernel,
    input_dim: int,
    dtype: torch.dtype,
    device: torch.device,
    mean_module: Mean | None = None,
    likelihood: _GaussianLikelihoodBase | None = None,
) -> Tensor:
    """The float64 fingerprint ``(*batch, F + 2)`` at ``probe_inputs(input_dim)``: the root (amplitude included), the
    likelihood's own noise variance and the prior mean (zero for a module not given); see
    :class:`~gprf.streaming.SufficientStatistics`. Equal for equal random draws, hyperparameters, noise and mean."""
    probe = probe_inputs(input_dim, dtype, device)
    with torch.no_grad():
        root = covariance_root(covar_module, probe).scaled_features()[..., 0, :]
        mean = probe.new_zeros(1) if mean_module is None else mean_module(probe)
        noise = None if likelihood is None else likelihood_noise(likelihood, probe, mean.shape)
        noise = torch.zeros_like(mean) if noise is None else noise
        batch_shape = torch.broadcast_shapes(root.shape[:-1], noise.shape[:-1], mean.shape[:-1])
        parts = [part.expand(*batch_shape, part.size(-1)).to(torch.float64) for part in (root, noise, mean)]
        return torch.cat(parts, dim=-1)
