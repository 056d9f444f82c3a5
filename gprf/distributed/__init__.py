r"""Random-feature GPs on rows sharded over processes, GPUs or hosts, on ``torch.distributed``.

Everything a random-feature GP needs from its rows is a sum over them (the :math:`F\times F` Gram matrix, projections
and scalars), so data-parallel training is one all-reduce of :math:`F(F+1)/2 + F + 2` numbers per step (plus the
models' fingerprints, checked before the sum is used) and one of the hyperparameter gradients:

* :class:`ShardedMarginalLogLikelihood`: GPyTorch's ``ExactMarginalLogLikelihood`` of the whole data on every rank,
  with exact gradients summed over the ranks in the backward pass; a plain optimizer loop and :func:`gprf.fit_mll` work
  unchanged (:mod:`gprf.fitting.placement`);
* :func:`sharded_predictor`: every rank holds the whole data's :math:`F\times F` posterior and predicts its own
  test points;
* :func:`broadcast_state`: rank 0's model on every rank;
* Thompson sampling over candidates sharded over ranks: :func:`gprf.botorch.sharded_thompson_sample`.

Ranks that disagree (features, hyperparameters, dtypes, devices, transforms, or the step they are at) get one clear
:class:`~gprf.exceptions.ShardMismatchError` on every rank, an exception on one rank is raised on every rank, and a
collective that times out raises :class:`~gprf.exceptions.CollectiveError` naming the rank and the step
(:mod:`gprf.distributed.exchange`).
"""

from gprf.distributed.exchange import CommunicationLog, ShardExchange
from gprf.distributed.marginal_likelihood import ShardedMarginalLogLikelihood
from gprf.distributed.prediction import sharded_predictor, sharded_statistics
from gprf.distributed.state import broadcast_state

__all__ = [
    "CommunicationLog",
    "ShardExchange",
    "ShardedMarginalLogLikelihood",
    "broadcast_state",
    "sharded_predictor",
    "sharded_statistics",
]
