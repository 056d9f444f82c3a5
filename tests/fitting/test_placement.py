"""RowPlacement: the single-process answers, and fit_mll asking the placement of its marginal likelihood."""

from __future__ import annotations

import gpytorch
import torch

import gprf
from gprf.fitting.end_point import prediction_failure
from gprf.fitting.placement import LOCAL_ROWS, RowPlacement, row_placement
from gprf.fitting.row_subsample import subsample_rows
from tests.prediction.conftest import make_data, make_model


def _mll(n=300):
    x, y = make_data(n=n)
    model = make_model(x, y, num_features=32)
    return gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)


def test_the_local_placement_answers_for_this_process():
    mll = _mll()
    model = mll.model
    assert row_placement(mll) is LOCAL_ROWS
    assert LOCAL_ROWS.num_rows(model) == 300
    torch.testing.assert_close(LOCAL_ROWS.subsample(model, 40, 3), subsample_rows(300, 40, 3, torch.device("cpu")))
    assert LOCAL_ROWS.agree_seconds(2.5) == 2.5
    assert LOCAL_ROWS.prediction_failure(mll) is None and prediction_failure(mll) is None
    before = LOCAL_ROWS.now()
    assert LOCAL_ROWS.now() >= before
    result = LOCAL_ROWS.fit_scale_hyperparameters(mll)
    assert result.mll_after >= result.mll_before


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

    def agree_seconds(self, seconds):
        self.asked.append("agree_seconds")
        return seconds

    def fit_scale_hyperparameters(self, mll):
        self.asked.append("fit_scale_hyperparameters")
        return super().fit_scale_hyperparameters(mll)

    def prediction_failure(self, mll):
        self.asked.append("prediction_failure")
        return super().prediction_failure(mll)


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
        "agree_seconds",
        ("subsample", 100, 4),
        "fit_scale_hyperparameters",
        "prediction_failure",
    ]
    assert rows_seen[:2] == [50, 50]  # the tuning steps saw this process's half of the subsample
    assert placement.clock > 0.0  # the recipe's clock is the placement's
