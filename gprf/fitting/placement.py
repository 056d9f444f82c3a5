r"""Where a fit's training rows live: what :func:`gprf.fit_mll` asks of them besides the marginal likelihood.

The recipe needs the number of rows, a seeded subsample of them, the exact scale refit (sums over every row), a
check that the model can predict at the end, and a clock for its time budget. With every row in this process these
are the plain operations of :class:`RowPlacement`. A marginal likelihood whose rows are sharded over processes
(:class:`gprf.distributed.ShardedMarginalLogLikelihood`) hands the recipe its own placement (its ``row_placement``
attribute), whose answers are the same on every process — the global row count, a subsample drawn across the
shards, reduced sums, one clock — so that every process takes the same decisions and makes the same collective
calls.
"""

from __future__ import annotations

import time

import torch
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP

from gprf.fitting.end_point import prediction_failure
from gprf.fitting.row_subsample import subsample_rows
from gprf.fitting.scale_fit import ScaleFitResult, fit_scale_hyperparameters


class RowPlacement:
    """Every training row in this process (module docstring); the base class of sharded placements."""

    def num_rows(self, model: ExactGP) -> int:
        """The number of training rows of the fit."""
        return model.train_targets.size(-1)

    def subsample(self, model: ExactGP, size: int, seed: int) -> torch.Tensor:
        """Sorted indices of this process's rows in the seeded subsample of ``size`` rows of the fit."""
        return subsample_rows(self.num_rows(model), size, seed, model.train_targets.device)

    def now(self) -> float:
        """The fit's clock in seconds (one reading for every process)."""
        return time.perf_counter()

    def agree_seconds(self, seconds: float) -> float:
        """The estimate of a duration every process plans with, from this process's ``seconds``."""
        return seconds

    def fit_scale_hyperparameters(self, mll: ExactMarginalLogLikelihood) -> ScaleFitResult:
        """The exact scale refit (:func:`~gprf.fitting.fit_scale_hyperparameters`) on every row of the fit."""
        return fit_scale_hyperparameters(mll)

    def prediction_failure(self, mll: ExactMarginalLogLikelihood) -> Exception | None:
        """Why the model cannot predict from every row of the fit, or ``None``
        (:func:`~gprf.fitting.end_point.prediction_failure`)."""
        return prediction_failure(mll)


#: The placement of a fit whose rows are all in this process.
LOCAL_ROWS = RowPlacement()


def row_placement(mll: ExactMarginalLogLikelihood) -> RowPlacement:
    """The placement a marginal likelihood declares (its ``row_placement`` attribute), else :data:`LOCAL_ROWS`."""
    placement = getattr(mll, "row_placement", None)
    return placement if isinstance(placement, RowPlacement) else LOCAL_ROWS
