r"""Summing :class:`~gprf.streaming.SufficientStatistics` over ``torch.distributed`` ranks.

With the data sharded over ranks, every rank streams its shard into its own statistics; since
:math:`G, b, q, s, N` are sums over data points, one all-reduce (sum) gives every rank the statistics of
the whole data set, hence the same posterior and marginal likelihood as a single process would get. All
ranks must use the same random features and hyperparameters (same seed, or one ``state_dict`` loaded
everywhere); that is checked on the statistics' fingerprints (features, noise and mean).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from gprf.streaming.statistics import SUMMED_FIELDS, SufficientStatistics, fingerprint_mismatch


def _all_reduce_copy(tensor: Tensor, op: dist.ReduceOp, group: dist.ProcessGroup | None) -> Tensor:
    result = tensor.clone()
    dist.all_reduce(result, op=op, group=group)
    return result


def _check_same_layout(statistics: SufficientStatistics, group: dist.ProcessGroup | None) -> None:
    """Fail with a clear message (instead of a hang or garbage) when ranks hold statistics of another shape."""
    parts = [getattr(statistics, name) for name in (*SUMMED_FIELDS, "fingerprint")]
    layout = [statistics.input_dim] + [t.dim() for t in parts] + [t.numel() for t in parts]
    layout = torch.tensor(layout, dtype=torch.float64, device=statistics.gram.device)
    smallest = _all_reduce_copy(layout, dist.ReduceOp.MIN, group)
    if not torch.equal(smallest, _all_reduce_copy(layout, dist.ReduceOp.MAX, group)):
        raise ValueError(
            "The ranks hold statistics of different shapes: every rank needs the same model (batch shape, "
            "number of features, input dimension) and the same target shape."
        )
    low = _all_reduce_copy(statistics.fingerprint, dist.ReduceOp.MIN, group)
    high = _all_reduce_copy(statistics.fingerprint, dist.ReduceOp.MAX, group)
    differing = fingerprint_mismatch(low, high, statistics.root_dim)
    if differing is not None:
        raise ValueError(
            f"The ranks use different {differing}: build the model with the same seed and hyperparameters on every "
            "rank, or broadcast rank 0's state_dict, before streaming."
        )


def all_reduce_statistics(
    statistics: SufficientStatistics, group: dist.ProcessGroup | None = None
) -> SufficientStatistics:
    r"""The statistics summed over all ranks of ``group`` (default: the world), returned on every rank.

    One collective sums :math:`G, b, q, s, N` packed into a single buffer (gloo for CPU tensors,
    NCCL for CUDA tensors); a few small collectives before it check that the ranks agree on shapes and
    features. Call it on every rank of the group.

    Example:
        >>> fit = StreamingFit.from_model(model).fit(my_shard)  # each rank its own shard
        >>> statistics = all_reduce_statistics(fit.statistics)
        >>> predictor = fit.predictor(statistics)  # the same posterior on every rank
    """
    if not isinstance(statistics, SufficientStatistics):
        raise TypeError(f"all_reduce_statistics expects SufficientStatistics, got {type(statistics).__name__}.")
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(
            "torch.distributed is not initialised: call torch.distributed.init_process_group(...) on every rank "
            "before all_reduce_statistics."
        )
    _check_same_layout(statistics, group)
    parts = [getattr(statistics, name) for name in SUMMED_FIELDS]
    buffer = torch.cat([part.reshape(-1) for part in parts])
    dist.all_reduce(buffer, op=dist.ReduceOp.SUM, group=group)
    summed = {
        name: chunk.view_as(part)
        for name, part, chunk in zip(SUMMED_FIELDS, parts, buffer.split([part.numel() for part in parts]), strict=True)
    }
    return SufficientStatistics(**summed, fingerprint=statistics.fingerprint, input_dim=statistics.input_dim)
