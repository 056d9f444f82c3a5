"""RowPlacement: the single-process answers, and fit_mll asking the placement of its marginal likelihood."""

from __future__ import annotations

import gpytorch
import torch

import gprf
from gprf.fitting.budget import RefitCost
from gprf.fitting.end_point import prediction_failure
from gprf.fitting.handover import RefitGram
from gprf.fitting.placement import LOCAL_ROWS, RowPlacement, row_placement
from gprf.fitting.row_subsample import subsample_rows
from gprf.testing import regression_data
from tests.helpers.regression import make_model


def _mll(n=300):
    x, y = regression_data(n=n)
    model = make_model(x, y, num_features=32)
    return gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)


def test_the_local_placement_answers_for_this_process():
    mll = _mll()
    model = mll.model
    assert row_placement(mll) is LOCAL_ROWS
    assert LOCAL_ROWS.num_rows(model) == 300
    torch.testing.assert_close(LOCAL_ROWS.subsample(model, 40, 3), subsample_rows(300, 40, 3, torch.device("cpu")))
    assert LOCAL_ROWS.refit_cost(model, lambda: RefitCost(2e-9, 3e-10)) == RefitCost(2e-9, 3e-10)
    before = LOCAL_ROWS.now()
    assert LOCAL_ROWS.now() >= before
    result, sums = LOCAL_ROWS.fit_scale_with_sums(mll)
    assert result.mll_after >= result.mll_before and sums.num_data == 300
    assert LOCAL_ROWS.end_fit(mll, RefitGram.after_refit(mll, sums), [])  # handed over
    assert not mll.training and prediction_failure(mll) is None


class _Recording(RowPlacement):
    """A placement that says it holds twice the rows and records what the recipe asks."""

    def __init__(self):
        self.asked = []
        self.clock = 0.0

    def num_rows(self, model):
        self.asked.append("num_rows")
        return 2 * super().num_rows(model)

    def subsample(self, model, size, seed):
        self.asked.append(("subsample", size, seed))
        return torch.arange(size // 2)  # this process's half of the subsample

    def now(self):
        self.clock += 0.001
        return self.clock

    def refit_cost(self, model, probe):
        self.asked.append("refit_cost")
        return super().refit_cost(model, probe)

    def fit_scale_with_sums(self, mll):
        self.asked.append("fit_scale_with_sums")
        return super().fit_scale_with_sums(mll)

    def end_fit(self, mll, refit, checkpoints):
        self.asked.append("end_fit")
        return super().end_fit(mll, refit, checkpoints)


def test_fit_mll_asks_the_placement_of_its_marginal_likelihood():
    mll = _mll()
    placement = _Recording()
    mll.row_placement = placement
    rows_seen = []
    gprf.fit_mll(
        mll,
        time_budget=100.0,
        tune_rows=100,
        tune_features=16,
        tune_steps=2,
        seed=4,
        callback=lambda stage, seconds: rows_seen.append(mll.model.train_targets.numel()),
    )
    assert placement.asked == [
        "num_rows",
        "refit_cost",
        ("subsample", 100, 4),
        "refit_cost",  # probed again just before the refit
        "fit_scale_with_sums",
        "end_fit",
    ]
    assert rows_seen[:2] == [50, 50]  # the tuning steps saw this process's half of the subsample
    assert placement.clock > 0.0  # the recipe's clock is the placement's
