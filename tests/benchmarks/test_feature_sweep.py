"""``python -m benchmarks.feature_sweep``: one fit_mll run per feature count and seed, tables of runs and means."""

from __future__ import annotations

import argparse

import pytest

from benchmarks import feature_sweep


def test_the_sweep_trains_every_feature_count_and_seed_and_prints_both_tables(capsys):
    argv = ["--features", "64,128", "--seeds", "0,1", "--time-budget", "30", "--max-n", "300", "--dtype", "float64"]
    assert feature_sweep.main(argv) == 0
    out = capsys.readouterr().out
    runs = [line.split() for line in out.splitlines() if line.split()[:1] in (["64"], ["128"])]
    per_run = [row for row in runs if "±" not in row]
    summary = [row for row in runs if "±" in row]
    assert [(row[0], row[2]) for row in per_run] == [("64", "0"), ("128", "0"), ("64", "1"), ("128", "1")]
    for row in per_run:
        assert row[1] == row[0]  # a small problem keeps every feature
        assert float(row[6]) < 1.0  # RMSE below the predict-the-mean baseline's 1 (standardised targets)
    assert [row[0] for row in summary] == ["64", "128"] and all(row[1] == "2" for row in summary)


def test_the_model_starts_at_the_protocols_hyperparameters():
    from benchmarks.regression_data import load_datasets, regression_split

    (data,) = load_datasets(None, None)
    _, split = regression_split(data, 100, 0, "cpu", __import__("torch").float64)
    model = feature_sweep.build_model(split, 32, seed=0)
    assert model.covar_module.base_kernel.lengthscale.flatten().tolist() == pytest.approx(
        [1.0] * split.train_x.shape[-1]
    )
    assert model.covar_module.outputscale.item() == pytest.approx(1.0)
    assert model.likelihood.noise.item() == pytest.approx(0.1)


def test_bad_seeds_are_refused():
    with pytest.raises(argparse.ArgumentTypeError, match="integer seeds"):
        feature_sweep.seeds("0,one")
    with pytest.raises(argparse.ArgumentTypeError, match="non-negative"):
        feature_sweep.seeds("-1")
