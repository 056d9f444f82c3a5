r"""What identifies a rank's model for the comparison before every sum (:mod:`gprf.distributed.sums`).

The fingerprint (:func:`gprf.streaming.features.model_fingerprint`) evaluates the covariance, the prior mean and the
likelihood's noise at a fixed probe input: it shows different random features, hyperparameters, noise or mean. A
BoTorch model also transforms its data before they reach those modules, with input and outcome transforms whose
state is learned from the training data at construction (``Normalize`` without bounds, ``Standardize``): built on
each rank's own rows they differ from rank to rank, and the sums would silently mix differently scaled data.
:func:`transform_state` makes that state part of the comparison.
"""

from __future__ import annotations

import torch
from gpytorch.models import ExactGP
from torch import Tensor

from gprf.streaming.features import model_fingerprint


def model_identity(model: ExactGP, input_dim: int) -> Tensor:
    """The fingerprint of ``model``'s covariance, mean and likelihood noise at the probe input of width
    ``input_dim``, in the dtype and on the device of the model's training inputs."""
    inputs = model.train_inputs[0]
    return model_fingerprint(
        model.covar_module,
        input_dim,
        inputs.dtype,
        inputs.device,
        getattr(model, "mean_module", None),
        model.likelihood,
    )


def transform_state(model: torch.nn.Module) -> Tensor | None:
    """The floating-point parameters and buffers of ``model``'s ``input_transform`` and ``outcome_transform``
    (BoTorch), flattened in float64, or ``None`` for a model without such transforms."""
    values = [
        tensor.detach().reshape(-1).double()
        for name in ("input_transform", "outcome_transform")
        if isinstance(getattr(model, name, None), torch.nn.Module)
        for tensor in (*getattr(model, name).parameters(), *getattr(model, name).buffers())
        if tensor.is_floating_point()
    ]
    return torch.cat([value.to(values[0].device) for value in values]) if values else None
