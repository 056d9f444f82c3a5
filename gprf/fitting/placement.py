r"""Where a fit's training rows live: what :func:`gprf.fit_mll` asks of them besides the marginal likelihood.

The recipe needs the number of rows, a seeded subsample of them, a clock for its time budget, the cost of the exact
refit that the budget plans with (timed probes, :mod:`gprf.fitting.budget`), the exact scale refit (sums over every
row) and, at the end, a model that can predict (:mod:`gprf.fitting.handover`). With every row in this process these
are the plain operations of :class:`RowPlacement`. A marginal likelihood whose rows are sharded over processes
(:class:`gprf.distributed.ShardedMarginalLogLikelihood`) hands the recipe its own placement (its ``row_placement``
attribute), whose answers are the same on every process — the global row count, a subsample drawn across the
shards, one clock, one cost estimate, reduced sums — so that every process takes the same decisions and makes the
same collective calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from gpytorch.mlls import ExactMarginalLogLikelihood
from gpytorch.models import ExactGP

from gprf.fitting.budget import RefitCost, process_seconds
from gprf.fitting.end_point import Checkpoint
from gprf.fitting.handover import RefitGram, end_with_refit
from gprf.fitting.row_subsample import subsample_rows
from gprf.fitting.scale_fit import ScaleFitResult, fit_scale_with_sums
from gprf.fitting.scale_statistics import FeatureSums


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
        return process_seconds()

    def refit_cost(self, model: ExactGP, probe: Callable[[], RefitCost]) -> RefitCost:
        """The cost of the exact refit on :meth:`num_rows` rows that every process plans with, from ``probe`` (which
        times the refit's steps on this process's rows, :func:`~gprf.fitting.budget.probe_refit_cost`)."""
        return probe()

    def fit_scale_with_sums(self, mll: ExactMarginalLogLikelihood) -> tuple[ScaleFitResult, FeatureSums | None]:
        """The exact scale refit on every row of the fit, and the sums of every row it formed
        (:func:`~gprf.fitting.scale_fit.fit_scale_with_sums`; ``None`` where it took the points route)."""
        return fit_scale_with_sums(mll)

    def end_fit(
        self, mll: ExactMarginalLogLikelihood, refit: RefitGram | None, checkpoints: Sequence[Checkpoint]
    ) -> bool:
        """Leave ``mll`` in eval mode where the model can predict from every row of the fit, the refit's Gram handed
        to its prediction cache where it applies; whether it was (:func:`~gprf.fitting.handover.end_with_refit`)."""
        return end_with_refit(mll, refit, checkpoints)


#: The placement of a fit whose rows are all in this process.
LOCAL_ROWS = RowPlacement()


def row_placement(mll: ExactMarginalLogLikelihood) -> RowPlacement:
    """The placement a marginal likelihood declares (its ``row_placement`` attribute), else :data:`LOCAL_ROWS`."""
    placement = getattr(mll, "row_placement", None)
    return placement if isinstance(placement, RowPlacement) else LOCAL_ROWS
