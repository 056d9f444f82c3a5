"""benchmarks.regression_plot: the figure file of ``--plot``, one column per dataset; every axis with two labelled
ticks or more and no two labels overlapping, on results whose ranges made that hard."""

from __future__ import annotations

import pytest

from benchmarks.regression_plot import PANELS, TIME_TICKS, _time_ticks, plot_regression, regression_figure
from tests.helpers.figures import assert_readable


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


def _curves(seconds: list[float], nll: list[float], rmse: list[float]) -> dict:
    """A one-dataset result: ``exact`` at the given checkpoints, ``gprf-64`` a little worse at the same ones."""
    exact = [
        {"train_s": t, "steps": 1, "nll": n, "rmse": r, "predict_s": 0.01}
        for t, n, r in zip(seconds, nll, rmse, strict=True)
    ]
    worse = [{**p, "nll": p["nll"] + 0.1, "rmse": p["rmse"] * 1.1} for p in exact]
    methods = {"exact": {"checkpoints": exact}, "gprf-64": {"checkpoints": worse}}
    dataset = {"train_points": 900, "inputs": 8, "baseline": {"rmse": 1.0, "nll": 1.42}, "methods": methods}
    return {"datasets": {"kin40k": dataset}}


DOUBLING = [0.25, 0.5, 1.0, 2.0, 4.0]
LONG = range(15)  # checkpoints from 0.05 s to 819 s
#: Results whose axes were hard to label: a narrow NLL range above 1 (a symmetric-log axis labels no tick there), a
#: narrow RMSE range inside one decade (a log axis labels none or one), a variance breakdown (NLL in the thousands),
#: checkpoints over five decades of seconds, and a single checkpoint.
HARD_RESULTS = {
    "narrow": _curves(DOUBLING, [1.2, 1.15, 1.12, 1.1, 1.09], [0.8, 0.75, 0.72, 0.71, 0.7]),
    "negative": _curves(DOUBLING, [-0.1, -0.3, -0.4, -0.45, -0.5], [0.45, 0.4, 0.38, 0.37, 0.36]),
    "breakdown": _curves(DOUBLING, [0.9, 0.7, 2e3, 3e3, 4e3], [0.6, 0.5, 0.45, 0.4, 0.38]),
    "long": _curves(
        [0.05 * 2**k for k in range(15)], [1.0 - k / 20 for k in range(15)], [0.9 / (1 + k) for k in range(15)]
    ),
    "single": _curves([3.0], [0.5], [0.5]),
}


@pytest.mark.parametrize("name", list(HARD_RESULTS))
def test_every_axis_has_labelled_ticks_and_no_labels_overlap(name):
    pytest.importorskip("matplotlib")
    figure = regression_figure(HARD_RESULTS[name])
    assert_readable(figure)
    nll_axes, rmse_axes = figure.axes
    seconds = [p["train_s"] for p in HARD_RESULTS[name]["datasets"]["kin40k"]["methods"]["exact"]["checkpoints"]]
    for axes in (nll_axes, rmse_axes):  # every checkpoint inside the time axis
        low, high = axes.get_xlim()
        assert low < min(seconds) and max(seconds) < high


@pytest.mark.parametrize(
    ("name", "nll_scale", "rmse_scale"),
    [("narrow", "linear", "linear"), ("breakdown", "symlog", "linear"), ("long", "linear", "linear")],
)
def test_metric_axes_turn_logarithmic_only_over_two_decades(name, nll_scale, rmse_scale):
    pytest.importorskip("matplotlib")
    nll_axes, rmse_axes = regression_figure(HARD_RESULTS[name]).axes
    assert (nll_axes.get_yscale(), rmse_axes.get_yscale()) == (nll_scale, rmse_scale)


def test_rmse_over_two_decades_is_drawn_on_a_log_axis():
    pytest.importorskip("matplotlib")
    _, rmse_axes = regression_figure(_curves(DOUBLING, [1.0] * 5, [1.0, 0.1, 0.03, 0.01, 0.005])).axes
    assert rmse_axes.get_yscale() == "log"
    assert_readable(rmse_axes.figure)


@pytest.mark.parametrize(
    ("smallest", "largest", "ticks"),
    [
        (0.25, 4.0, [0.2, 0.5, 1.0, 2.0, 5.0]),  # 1-2-5 steps enclosing the data
        (3.0, 3.0, [2.0, 5.0]),  # one checkpoint: the steps on either side
        (2.0, 5.0, [2.0, 5.0]),  # ends on a step stay
        (0.05, 819.2, [0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]),  # too many 1-2-5 steps: decades
        (1e-3, 1e5, [1e-3, 1e-1, 1e1, 1e3, 1e5]),  # too many decades: every other one
    ],
)
def test_time_ticks(smallest, largest, ticks):
    assert _time_ticks(smallest, largest) == pytest.approx(ticks, rel=1e-12)
    assert len(_time_ticks(smallest, largest)) <= TIME_TICKS
