r"""How far :func:`gprf.fit_mll` grows the nested feature kernels back before its exact refit, within the budget.

The tuning stage uses a prefix of each nested kernel's draw; the refit runs at the model's own sizes. When the
refit's estimated cost there (:class:`~gprf.fitting.budget.RefitCost`) exceeds the time left, ``grow="fit"`` cuts
every nested kernel to the largest common cap :math:`F'` (a prefix of its draw, a valid draw in its own right) whose
refit fits, for good: the model keeps :math:`F'` features afterwards. ``grow="full"`` runs the refit at full size
anyway. Either way a :class:`~gprf.exceptions.BudgetWarning` says so, with the estimate, before the refit starts.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager

from gpytorch.mlls import ExactMarginalLogLikelihood

from gprf.exceptions import BudgetWarning
from gprf.fitting.budget import FitClock, RefitCost
from gprf.kernels.feature_kernel import unwrap_scale_kernel
from gprf.kernels.feature_map_owner import FeatureMapOwner


class FeatureGrowth:
    """The nested kernels of a fit (those tuned on a prefix of their draws) and the sizes the refit can afford.

    Args:
        mll: The marginal likelihood being fitted.
        nested: The feature kernels whose draws the fit cuts to prefixes.
        least: The smallest cap, the tuning stage's (its refit is the fallback when no larger one fits).
        num_rows: The rows of the refit (:meth:`gprf.fitting.placement.RowPlacement.num_rows`: those of every
            process when they are sharded, so that every process takes the same decision).
    """

    def __init__(
        self, mll: ExactMarginalLogLikelihood, nested: Sequence[FeatureMapOwner], least: int | None, num_rows: int
    ) -> None:
        self.mll = mll
        self.num_rows = num_rows
        self.nested = list(nested)
        self.least = least
        self.largest = max((kernel.num_features for kernel in self.nested), default=0)

    @contextmanager
    def capped(self, cap: int | None) -> Iterator[None]:
        """Within the block, the nested kernels have at most ``cap`` features (``None``: their own sizes)."""
        with ExitStack() as stack:
            for kernel in self.nested:
                if cap is not None and kernel.num_features > cap:
                    stack.enter_context(kernel.features_resized(cap))
            yield

    def total(self, cap: int | None) -> int:
        """Columns of the model's feature root with the nested kernels capped at ``cap`` (``None``: as they are)."""
        with self.capped(cap):
            return unwrap_scale_kernel(self.mll.model.covar_module).root_dim

    def fit_refit_within(self, cost: RefitCost, clock: FitClock, grow: str, report: Callable[..., None]) -> None:
        """Before the refit: when its estimate at the model's sizes exceeds the time left, warn, and with
        ``grow="fit"`` first cut the nested kernels to the largest cap whose refit fits (for good)."""
        num_rows = self.num_rows
        total = self.total(None)
        estimate, left = cost.seconds(num_rows, total), clock.left()
        if estimate <= left:
            return
        budget = f"{max(left, 0.0):.1f} s left of time_budget={clock.budget:g}"
        if grow == "full" or not self.nested:
            if self.nested:
                reason, fix = "grow='full'", "pass grow='fit' to keep the budget with a prefix of the draws, "
            else:
                reason, fix = "its feature draws cannot be cut to a prefix", ""
            warnings.warn(
                f"fit_mll: the exact refit at F = {total} features is estimated at {estimate:.1f} s, more than the "
                f"{budget}; it runs anyway ({reason}), so the fit will overrun the budget: {fix}raise time_budget "
                "or build the model with fewer features.",
                BudgetWarning,
                stacklevel=3,
            )
            return
        cap = cost.largest_cap(num_rows, left, self.total, self.largest, self.least)
        for kernel in self.nested:
            if kernel.num_features > cap:
                kernel.resize_features(cap)
        kept = self.total(None)
        kept_estimate = cost.seconds(num_rows, kept)
        overrun = "" if kept_estimate <= left else " (the smallest, the tuning stage's: the budget will be overrun)"
        warnings.warn(
            f"fit_mll: the exact refit at F = {total} features is estimated at {estimate:.1f} s, more than the "
            f"{budget}; the feature kernels keep the first {cap} features of their draws from now on (F = {kept}, "
            f"refit estimated at {kept_estimate:.1f} s){overrun}. Pass grow='full' to keep all {total} features "
            "(and overrun the budget), or raise time_budget.",
            BudgetWarning,
            stacklevel=3,
        )
        report(f"grow to F = {kept} of {total} (budget)", None)
