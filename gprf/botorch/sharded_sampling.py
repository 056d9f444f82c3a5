r"""Thompson sampling with the training rows and the candidates sharded over ``torch.distributed`` ranks.

Posterior sample paths of a gprf model need its rows only through the sums :math:`G` and :math:`p` of Matheron's
update in weight space (:mod:`gprf.botorch.matheron`). :func:`sharded_matheron_paths` has each rank form its share,
and one all-reduce (:mod:`gprf.distributed.sums`) both adds the shares up and hands every rank rank 0's random draws
(the prior weights :math:`w` and the normals behind the update's noise term): every rank holds the same paths, the
ones ``draw_matheron_paths`` draws on one process whose random generator is in rank 0's state.

:func:`sharded_thompson_sample` then scores each rank's own candidates and agrees on the batch with one all-gather of
every rank's best :math:`\min(S, C_r)` (value, index) pairs per path, :math:`2S^2` numbers: path by path, every rank
takes the best candidate not taken by an earlier path — a path can lose at most :math:`S - 1` candidates to earlier
ones, so each rank's best :math:`S` suffice — ties going to the lowest global index (rank 0's candidates first), as
:func:`~gprf.botorch.thompson_sample` does with all candidates on one process. A last all-reduce of :math:`S d`
numbers brings the chosen points from the ranks that hold them.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
from botorch.models.model import Model
from botorch.sampling.pathwise.utils import get_train_inputs
from gpytorch.models import ExactGP
from torch import Size, Tensor

from gprf.botorch.matheron import (
    capacitance_update_weights,
    matheron_paths,
    matheron_prior_paths,
    training_root,
    update_normals,
)
from gprf.botorch.paths import SharedFeatureMatheronPath
from gprf.distributed.exchange import ShardExchange, dtype_code
from gprf.distributed.identity import model_identity, transform_state
from gprf.distributed.sums import ShardParts, sum_over_ranks
from gprf.linalg import CapacitanceFactor

_PATHS_STEP = "sample paths"
_BATCH_STEP = "Thompson batch"


def sharded_matheron_paths(
    model: ExactGP, sample_shape: Size, group: dist.ProcessGroup | None = None
) -> SharedFeatureMatheronPath:
    """Posterior sample paths of the model of every rank's training rows, the same on every rank (module docstring).

    Call it on every rank, each model holding its own rows (an empty shard is valid) with the same random features,
    hyperparameters and transforms (a :class:`~gprf.exceptions.ShardMismatchError` on every rank otherwise).

    Args:
        model: An ``ExactGP`` (e.g. BoTorch's ``SingleTaskGP`` without an outcome transform fitted to its shard) whose
            ``covar_module`` is a gprf feature kernel, with a Gaussian likelihood.
        sample_shape: Sizes of the sample dimensions.
        group: The process group (default: the world).

    Returns:
        What :func:`~gprf.botorch.weight_space_matheron_paths` returns on one process.
    """
    exchange = ShardExchange(group)
    try:
        prior_paths = matheron_prior_paths(model, sample_shape)
        with torch.no_grad():
            root, residuals = training_root(model)
            gram, projection = root.sums(residuals.unsqueeze(-1))
            standard = update_normals(gram, prior_paths.weight)
            (points,) = get_train_inputs(model, transformed=True)
            parts = ShardParts(
                [gram, projection],
                (True, False),
                rows=root.num_points,
                fingerprint=model_identity(model, points.size(-1)),
                root_dim=gram.size(-1),
                transforms=transform_state(model),
                shared=[prior_paths.weight, standard],
                agreed=[("the number of features", gram.size(-1)), ("the input dimension", points.size(-1))],
            )
        failure = None
    except Exception as error:  # raised on every rank by the sum, so that none waits for the others
        parts, failure = None, error
    totals = sum_over_ranks(exchange, _PATHS_STEP, parts, failure)
    (gram, projection), (weight, standard) = totals.sums, totals.shared
    prior_paths.weight = weight
    factor = CapacitanceFactor.from_gram(gram)
    return matheron_paths(model, prior_paths, capacitance_update_weights(factor, gram, projection, weight, standard))


def _check_candidates(candidates: object, input_dim: int) -> None:
    if not torch.is_tensor(candidates) or not candidates.is_floating_point() or candidates.dim() != 2:
        shape = tuple(candidates.shape) if torch.is_tensor(candidates) else type(candidates).__name__
        raise ValueError(f"candidates must be a floating-point tensor of shape (C, d), got {shape}.")
    if candidates.size(-1) != input_dim:
        raise ValueError(f"candidates have {candidates.size(-1)} columns; the model's inputs have {input_dim}.")
    if bool(candidates.isnan().any()):
        raise ValueError("candidates hold NaN; pass points of the search space (e.g. TrustRegion.candidates).")


def _local_best(paths: SharedFeatureMatheronPath, candidates: Tensor, num_samples: int) -> Tensor:
    """``(S, S, 2)``: per path, this rank's best ``min(S, C_r)`` values (descending; equal values by index) and their
    indices, padded with ``(-inf, -1)``."""
    best = torch.full((num_samples, num_samples, 2), -math.inf, dtype=torch.float64, device=candidates.device)
    best[..., 1] = -1
    if len(candidates) == 0:
        return best
    with torch.no_grad():
        values = paths(candidates).reshape(num_samples, len(candidates)).double()
    if bool(values.isnan().any()):
        raise ValueError("The sample paths are NaN at some candidates; check the model's hyperparameters and data.")
    kept = min(num_samples, len(candidates))
    order = torch.sort(values, dim=-1, descending=True, stable=True).indices[:, :kept]
    best[:, :kept, 0] = values.gather(-1, order)
    best[:, :kept, 1] = order.double()
    return best


def _choose(gathered: Tensor) -> list[tuple[int, int]]:
    """``(rank, index)`` of each path's best candidate not taken by an earlier path, from every rank's
    :func:`_local_best` ``(world_size, S, S, 2)``; the same on every rank."""
    world_size, num_samples = gathered.shape[:2]
    values = gathered[..., 0].permute(1, 0, 2).reshape(num_samples, -1).cpu()  # paths x (rank, position)
    indices = gathered[..., 1].permute(1, 0, 2).reshape(num_samples, -1).long().cpu()
    owners = torch.arange(world_size).repeat_interleave(num_samples)
    keys = owners * (int(indices.max()) + 1) + indices  # one key per (rank, index)
    taken = torch.empty(0, dtype=torch.long)
    chosen = []
    for path in range(num_samples):
        free = ~torch.isin(keys[path], taken) & (indices[path] >= 0)
        # argmax takes the first of equal values: the lowest rank, then the rank's own order (by index).
        position = int(values[path].masked_fill(~free, -math.inf).argmax())
        taken = torch.cat([taken, keys[path, position : position + 1]])
        chosen.append((int(owners[position]), int(indices[path, position])))
    return chosen


def sharded_thompson_sample(
    model: Model, candidates: Tensor, num_samples: int, group: dist.ProcessGroup | None = None
) -> Tensor:
    """``num_samples x d`` distinct points of the candidates of all ranks, the same batch on every rank: for each of
    ``num_samples`` posterior sample paths of the whole data (:func:`sharded_matheron_paths`) in turn, its best
    candidate not taken by an earlier path (maximisation; module docstring).

    Call it on every rank with that rank's model (its own training rows) and its own ``candidates`` ``(C_r, d)``
    (any number, none included). On one process it is :func:`~gprf.botorch.thompson_sample`; single-output models
    without batch dimensions only.

    Raises:
        ValueError: Candidates of the wrong shape or with NaN (on any rank: raised on every rank), ``num_samples``
            not between 1 and the total number of candidates, or a model with several outputs or a batch shape.
    """
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"num_samples must be a positive integer, got {num_samples!r}.")
    if model.num_outputs != 1 or len(model.batch_shape) > 0:
        raise ValueError(
            "sharded_thompson_sample needs a single-output model without batch dimensions, got "
            f"{model.num_outputs} outputs and batch shape {tuple(model.batch_shape)}."
        )
    (points,) = get_train_inputs(model, transformed=False)
    paths = sharded_matheron_paths(model, Size([num_samples]), group)
    exchange = ShardExchange(group)
    try:
        _check_candidates(candidates, points.size(-1))
        best, failure = _local_best(paths, candidates, num_samples), None
        agreed = [("the number of sample paths", num_samples), ("the candidates' dtype", dtype_code(candidates.dtype))]
    except Exception as error:  # raised on every rank by the header, so that none waits for the others
        best, failure, agreed = None, error, []
    counts = exchange.agree(_BATCH_STEP, agreed, own=() if best is None else (len(candidates),), failure=failure)
    total = int(counts.sum())
    if num_samples > total:
        raise ValueError(f"num_samples must be at most the {total} candidates of all ranks, got {num_samples}.")
    chosen = _choose(exchange.all_gather(_BATCH_STEP, best))
    batch = torch.zeros(num_samples, candidates.size(-1), dtype=torch.float64, device=candidates.device)
    for path, (rank, index) in enumerate(chosen):
        if rank == exchange.rank:
            batch[path] = candidates[index].double()
    return exchange.all_reduce(_BATCH_STEP, batch).to(candidates.dtype)
