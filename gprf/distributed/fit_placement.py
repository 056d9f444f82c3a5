r""":func:`gprf.fit_mll` on rows sharded over ranks: the recipe's questions answered alike on every rank.

:class:`ShardedRows` is the :class:`~gprf.fitting.placement.RowPlacement` of a
:class:`~gprf.distributed.ShardedMarginalLogLikelihood`:

* the number of rows is :math:`N = \sum_r N_r`, and the tuning subsample is drawn from the global row order (rank
  0's rows first, then rank 1's, ...) with the fit's seed, each rank keeping the rows it holds — the subsample one
  process holding all the rows in that order would draw;
* the exact scale refit sums its row sums over the ranks (the ``reduce`` of
  :meth:`~gprf.fitting.FeatureSums.from_chunks`) before the eigendecomposition, so every rank fits the outputscale,
  noise and constant mean of the whole data to the same values;
* the end-of-fit check factors the capacitance of the whole data (the sums of
  :func:`~gprf.distributed.sharded_statistics`). The refit's Gram matrix is not handed to the model's
  prediction cache (:mod:`gprf.fitting.handover`): the model's own cache is built from its training inputs, this
  rank's rows, so a posterior of every rank's rows in it would last only until the model next rebuilds its cache, and
  its predictions would depend on when that happens. Predictions from all the rows are
  :func:`~gprf.distributed.sharded_predictor`'s;
* the clock is rank 0's (each reading is one small collective), and the refit's cost is planned with the slowest
  rank's rates (each rank probes its own rows, :mod:`gprf.fitting.budget`), so the time budget and the feature growth
  make the same decisions on every rank and none waits for a step the others skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import torch
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP
from torch import Tensor

from gprf.distributed.exchange import ShardExchange
from gprf.distributed.identity import model_identity, transform_state
from gprf.distributed.prediction import sharded_statistics
from gprf.distributed.sums import ShardParts, sum_over_ranks
from gprf.fitting.budget import RefitCost, process_seconds
from gprf.fitting.end_point import NUMERICAL_FAILURES, Checkpoint, end_where_predictable
from gprf.fitting.handover import RefitGram
from gprf.fitting.placement import RowPlacement
from gprf.fitting.row_subsample import subsample_rows
from gprf.fitting.scale_fit import ScaleFitResult, fit_scale_with_sums
from gprf.fitting.scale_statistics import FeatureSums

# The sums of the scale refit: G (symmetric), the two projections, q and t.
_SCALE_SYMMETRIC = (True, False, False, False)


class ShardedRows(RowPlacement):
    """The rows of a fit split over the ranks of ``exchange`` (module docstring)."""

    def __init__(self, exchange: ShardExchange) -> None:
        self.exchange = exchange

    def _row_counts(self, model: ExactGP) -> list[int]:
        counts = self.exchange.agree("row counts", own=(model.train_targets.size(-1),))
        return [int(count) for count in counts[:, 0].tolist()]

    def num_rows(self, model: ExactGP) -> int:
        return sum(self._row_counts(model))

    def subsample(self, model: ExactGP, size: int, seed: int) -> Tensor:
        counts = self._row_counts(model)
        offset = sum(counts[: self.exchange.rank])
        chosen = subsample_rows(sum(counts), size, seed, torch.device("cpu"))
        mine = chosen[(chosen >= offset) & (chosen < offset + counts[self.exchange.rank])] - offset
        return mine.to(model.train_targets.device)

    def now(self) -> float:
        return float(self.exchange.agree("fit clock", own=(process_seconds(),))[0, 0])

    def refit_cost(self, model: ExactGP, probe: Callable[[], RefitCost]) -> RefitCost:
        r"""The slowest rank's rates. Rank :math:`r` forms the sums of its :math:`N_r` of the :math:`N` rows: in the
        cost of all :math:`N` rows its Gram rate is :math:`c_{G,r}N_r/N`. A rank without rows has no Gram to time
        (and its :math:`F^3` steps are those of the others), so it probes nothing and plans with theirs."""
        counts = self._row_counts(model)
        mine, total = counts[self.exchange.rank], sum(counts)
        failure, own = None, (0.0, 0.0)
        if mine > 0:
            try:
                cost = probe()
                own = (cost.gram_rate * mine / total, cost.cubic_rate)
            except Exception as error:  # raised on every rank by the exchange, not here alone
                failure = error
        rates = self.exchange.agree("fit cost estimate", own=own, failure=failure)
        return RefitCost(gram_rate=float(rates[:, 0].max()), cubic_rate=float(rates[:, 1].max()))

    def fit_scale_with_sums(self, mll: ExactMarginalLogLikelihood) -> tuple[ScaleFitResult, FeatureSums]:
        return fit_scale_with_sums(mll, reduce_sums=partial(self._sum_scale_sums, mll.model))

    def _sum_scale_sums(self, model: ExactGP, sums: list[Tensor], num_rows: int) -> tuple[list[Tensor], int]:
        root_dim = sums[0].size(-1)
        parts = ShardParts(
            sums,
            _SCALE_SYMMETRIC,
            num_rows,
            model_identity(model, model.train_inputs[0].size(-1)),
            root_dim,
            transform_state(model),
            agreed=[("the number of features", root_dim)],
        )
        totals = sum_over_ranks(self.exchange, "scale refit", parts)
        return totals.sums, totals.num_rows

    def end_fit(
        self, mll: ExactMarginalLogLikelihood, refit: RefitGram | None, checkpoints: Sequence[Checkpoint]
    ) -> bool:
        """The fit ends where the capacitance of every rank's rows factors; nothing is handed over (module
        docstring)."""
        end_where_predictable(mll, checkpoints, failure_of=self._prediction_failure)
        return False

    def _prediction_failure(self, mll: ExactMarginalLogLikelihood) -> Exception | None:
        mll.train()  # as the single-process check leaves it: in eval mode, without caches of other hyperparameters
        mll.eval()
        try:
            sharded_statistics(mll.model, self.exchange).capacitance()
        except NUMERICAL_FAILURES as error:  # the same sums on every rank: the same outcome on every rank
            return error
        return None
