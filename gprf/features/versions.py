r"""Version stamps of module state, so that caches built from a model notice when it changes (no host
synchronisation: the stamps are host-side counters).

* :func:`feature_versions`: the draw version of every random feature map (a fresh value per draw, process-wide:
  :mod:`gprf.features.nested`).
* :func:`state_versions`: those, plus the identity and the version counter of every parameter and buffer. Torch
  bumps a tensor's counter on every in-place write: optimizer steps, ``load_state_dict``, writes under
  ``torch.no_grad()``, ``resample_features``. GPyTorch's ``Module.initialize`` (behind every property setter, e.g.
  ``kernel.lengthscale = 0.5``) writes through ``.data``, which no counter sees; :func:`mark_written` makes such a
  write visible, and gprf's kernels call it from their ``initialize``.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain

import torch
from torch import Tensor

from gprf.features.base import FeatureMapBase


def feature_versions(module: torch.nn.Module) -> tuple[int, ...]:
    """The draw versions of every random feature map inside ``module`` (they change when the draws do)."""
    return tuple(child.draw_version for child in module.modules() if isinstance(child, FeatureMapBase))


def _tensor_version(tensor: Tensor) -> int | None:
    # Inference tensors keep no version counter (and cannot be written outside inference mode).
    return None if tensor.is_inference() else tensor._version


def tensor_versions(*tensors: Tensor) -> tuple:
    """The version counters of ``tensors`` (views share their base's): they change with any in-place write."""
    return tuple(_tensor_version(tensor) for tensor in tensors)


def state_versions(*modules: torch.nn.Module | None) -> tuple:
    """A stamp of the state of ``modules`` (``None`` entries skipped): it differs after any new feature draw, any
    in-place write to a parameter or buffer, or any parameter or buffer replaced by another tensor."""
    stamps = []
    for module in modules:
        if module is None:
            continue
        tensors = chain(module.parameters(), module.buffers())
        stamps.append((feature_versions(module), tuple((id(t), _tensor_version(t)) for t in tensors)))
    return tuple(stamps)


@torch.no_grad()
def mark_written(module: torch.nn.Module, names: Iterable[str]) -> None:
    """Bump the version counters of ``module``'s own parameters and buffers ``names`` (an exact no-op write), so that
    :func:`state_versions` sees values written through ``.data``; other names (properties, dotted paths) are
    skipped."""
    own = dict(chain(module.named_parameters(recurse=False), module.named_buffers(recurse=False)))
    for name in names:
        tensor = own.get(name)
        if tensor is not None and not tensor.is_inference():
            tensor.copy_(tensor)
