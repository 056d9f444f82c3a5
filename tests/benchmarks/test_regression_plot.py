"""benchmarks.regression_plot: the figure file of ``--plot``, one column per dataset."""

from __future__ import annotations

import pytest

from benchmarks.regression_plot import PANELS, plot_regression


def _result(names: list[str]) -> dict:
    point = {"train_s": 0.5, "steps": 3, "rmse": 0.4, "nll": 1.0, "predict_s": 0.01}
    later = {**point, "train_s": 1.0, "rmse": 0.2, "nll": -0.5}
    methods = {"exact": {"checkpoints": [point, later]}, "gprf-64": {"checkpoints": [later]}}
    dataset = {"train_points": 90, "inputs": 2, "baseline": {"rmse": 1.0, "nll": 1.42}, "methods": methods}
    return {"datasets": dict.fromkeys(names, dataset)}


def test_the_plot_is_a_png_with_a_column_per_dataset(tmp_path):
    names = ["a", "b"]
    matplotlib = pytest.importorskip("matplotlib")
    from PIL import Image

    path = tmp_path / "curves.png"
    plot_regression(_result(names), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = Image.open(path).size
    dpi = matplotlib.rcParams["savefig.dpi"]
    dpi = matplotlib.rcParams["figure.dpi"] if dpi == "figure" else dpi
    assert (width, height) == (round(4.0 * len(names) * dpi), round(6.5 * dpi))
    assert [key for key, *_ in PANELS] == ["nll", "rmse"]
