"""Sample paths that keep what they were drawn with.

A posterior sample path is one draw from the posterior of the model *as it was when the path was drawn*: its update
weights were solved with that kernel, those feature draws, that mean and noise. So every part of the model that a
gprf path reads when it is evaluated — the kernel with its random features and hyperparameters, the prior mean, the
input and outcome transforms — is a frozen copy taken when the path is drawn: a later ``resample_features()``, a refit
or any other change of the model leaves drawn paths as they were (and a path never sees half of a change, e.g. new
features with old update weights). Paths stay differentiable in their inputs; they carry no gradient to the model's
hyperparameters.
"""

from __future__ import annotations

import copy
from typing import TypeVar

from torch.nn import Module

#: The type of the module :func:`frozen_copy` copies, which is the type of the copy.
ModuleT = TypeVar("ModuleT", bound=Module)


def frozen_copy(module: ModuleT | None) -> ModuleT | None:
    """A copy of ``module`` that no later change of ``module`` reaches: every parameter and buffer copied, detached
    and without ``requires_grad`` (``None`` stays ``None``). Tensors computed with autograd (e.g. weights solved with
    the hyperparameters) are copied as detached values."""
    if module is None:
        return None
    tensors = [*module.parameters(), *module.buffers()]
    # deepcopy refuses tensors inside an autograd graph: hand it their detached values instead.
    memo = {id(tensor): tensor.detach().clone() for tensor in tensors if tensor.grad_fn is not None}
    frozen = copy.deepcopy(module, memo)
    return frozen.requires_grad_(False)
