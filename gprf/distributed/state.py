"""One model on every rank: rank 0's ``state_dict`` loaded everywhere.

A gprf model's state — random feature draws (buffers), hyperparameters, the likelihood's noise — holds nothing of the
training rows (``ExactGP`` keeps those outside its ``state_dict``), so a checkpoint written on one rank restores the
same model on any number of ranks, each with its own shard. :func:`broadcast_state` is the same without a file:
models built with different seeds on different ranks become rank 0's model on every rank.
"""

from __future__ import annotations

import zlib
from collections import defaultdict

import torch
import torch.distributed as dist

from gprf.distributed.exchange import ShardExchange

_STEP = "model state"


def broadcast_state(module: torch.nn.Module, group: dist.ProcessGroup | None = None) -> None:
    """Load rank 0's ``module.state_dict()`` into ``module`` on every rank of ``group`` (default: the world).

    Call it on every rank, with modules of the same structure (the same state names, shapes and dtypes; checked
    first, a :class:`~gprf.exceptions.ShardMismatchError` on every rank otherwise). One broadcast per dtype; the
    state is loaded with ``load_state_dict``, so caches built on the old state (a gprf model's prediction cache) see
    the change.

    Example:
        >>> model = build_model(seed=rank)  # any seed: rank 0's draw wins
        >>> gprf.distributed.broadcast_state(model)
    """
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"broadcast_state takes a torch.nn.Module, got {type(module).__name__}.")
    exchange = ShardExchange(group)
    state = module.state_dict()
    signature = repr([(name, tuple(value.shape), str(value.dtype)) for name, value in state.items()])
    exchange.agree(
        _STEP,
        [
            ("the number of state tensors", len(state)),
            ("the number of state values", sum(value.numel() for value in state.values())),
            ("the state's names, shapes and dtypes (a checksum)", zlib.crc32(signature.encode())),
        ],
    )
    by_dtype: dict[torch.dtype, list[str]] = defaultdict(list)
    for name, value in state.items():
        by_dtype[value.dtype].append(name)
    loaded = {}
    for names in by_dtype.values():
        flat = torch.cat([state[name].reshape(-1) for name in names])
        shared = exchange.broadcast(_STEP, flat)
        for name, value in zip(names, shared.split([state[name].numel() for name in names]), strict=True):
            loaded[name] = value.view_as(state[name])
    module.load_state_dict(loaded)
