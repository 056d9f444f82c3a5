r""":func:`gprf.fit_mll` on rows sharded over ranks: the recipe's questions answered alike on every rank.

:class:`ShardedRows` is the :class:`~gprf.fitting.placement.RowPlacement` of a
:class:`~gprf.distributed.ShardedMarginalLogLikelihood`:

* the number of rows is :math:`N = \sum_r N_r`, and the tuning subsample is drawn from the global row order (rank
  0's rows first, then rank 1's, ...) with the fit's seed, each rank keeping the rows it holds — the subsample one
  process holding all the rows in that order would draw;
* the exact scale refit sums its row sums over the ranks before the eigendecomposition, so every rank fits the
  outputscale, noise and constant mean of the whole data to the same values;
* the end-of-fit check factors the capacitance of the whole data (the sums of
  :func:`~gprf.distributed.prediction.sharded_statistics`);
* the clock is rank 0's (each reading is one small collective) and a duration estimate is the largest rank's, so the
  time budget makes the same decisions on every rank and none waits for a step the others skipped.
"""

from __future__ import annotations

import time
from functools import partial

import torch
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP
from torch import Tensor

from gprf.distributed.exchange import ShardExchange
from gprf.distributed.identity import model_identity, transform_state
from gprf.distributed.prediction import sharded_statistics
from gprf.distributed.sums import ShardParts, sum_over_ranks
from gprf.fitting.end_point import NUMERICAL_FAILURES
from gprf.fitting.placement import RowPlacement
from gprf.fitting.row_subsample import subsample_rows
from gprf.fitting.scale_fit import ScaleFitResult, fit_scale_hyperparameters

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
        return float(self.exchange.agree("fit clock", own=(time.perf_counter(),))[0, 0])

    def agree_seconds(self, seconds: float) -> float:
        return float(self.exchange.agree("fit cost estimate", own=(seconds,))[:, 0].max())

    def fit_scale_hyperparameters(self, mll: ExactMarginalLogLikelihood) -> ScaleFitResult:
        return fit_scale_hyperparameters(mll, reduce_sums=partial(self._sum_scale_sums, mll.model))

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

    def prediction_failure(self, mll: ExactMarginalLogLikelihood) -> Exception | None:
        mll.train()  # as the single-process check leaves it: in eval mode, without caches of other hyperparameters
        mll.eval()
        try:
            sharded_statistics(mll.model, self.exchange).capacitance()
        except NUMERICAL_FAILURES as error:  # the same sums on every rank: the same outcome on every rank
            return error
        return None
