"""``--plot`` of ``--what regression``: test NLL and RMSE against training time, one column per dataset.

Drawn on a bare :class:`matplotlib.figure.Figure` (Agg canvas, no ``pyplot``): no global backend switch and no
window, whatever the caller's matplotlib setup.

Every axis carries at least two labelled ticks. A logarithmic axis labels only whole decades, so a metric is drawn
on one (log for RMSE, symmetric log for NLL, which can be negative) only when its values span two decades or more,
which happens when a method's variances break down and its NLL runs to hundreds; otherwise the axis is linear.
The time axis is logarithmic (the checkpoints double) with ticks at 1-2-5 steps or decades that enclose the data.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # matplotlib is imported where a figure is drawn
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

#: Rows of the figure: the JSON key, the axis label and the logarithmic scale used when the values span two decades.
PANELS = (("nll", "test NLL", "symlog"), ("rmse", "test RMSE", "log"))
#: Decades a metric must span before its axis turns logarithmic (so that two decade ticks lie inside it).
LOG_SPAN_DECADES = 2.0
#: Width of the linear zone of the symmetric-log NLL axis, around 0.
SYMLOG_LINTHRESH = 1.0
#: Most labelled ticks on the time axis (its labels are a few characters wide; more would crowd a 4-inch panel).
TIME_TICKS = 6
#: Factor by which the time axis reaches beyond its end ticks.
TIME_PAD = 1.1


def _symlog(value: float) -> float:
    """The symmetric-log coordinate of ``value`` in decades (linear within +-1, as matplotlib's ``symlog`` with
    ``linthresh=1, linscale=1``): 0, 1, 10, 100 sit at 0, 1, 2, 3."""
    magnitude = abs(value) / SYMLOG_LINTHRESH
    return math.copysign(magnitude if magnitude <= 1 else 1 + math.log10(magnitude), value)


def _from_symlog(coordinate: float) -> float:
    """The inverse of :func:`_symlog`."""
    magnitude = abs(coordinate)
    return math.copysign(magnitude if magnitude <= 1 else 10.0 ** (magnitude - 1), coordinate) * SYMLOG_LINTHRESH


def _metric_axis(ax: Axes, values: list[float], log_kind: str) -> None:
    """The y scale: ``log_kind`` when ``values`` span :data:`LOG_SPAN_DECADES` decades, else linear. The symmetric
    log axis gets its limits from the data (5% margins in decades): matplotlib's own round out to whole decades of
    both signs, half the panel empty below an NLL that never goes negative."""
    finite = [v for v in values if math.isfinite(v)]
    if log_kind == "log" and finite and min(finite) > 0 and math.log10(max(finite) / min(finite)) >= LOG_SPAN_DECADES:
        ax.set_yscale("log")
    elif log_kind == "symlog" and finite and _symlog(max(finite)) - _symlog(min(finite)) >= LOG_SPAN_DECADES:
        low, high = _symlog(min(finite)), _symlog(max(finite))
        ax.set_yscale("symlog", linthresh=SYMLOG_LINTHRESH)
        ax.set_ylim(_from_symlog(low - 0.05 * (high - low)), _from_symlog(high + 0.05 * (high - low)))
    else:
        ax.set_yscale("linear")


def _log_sequence(smallest: float, largest: float, multiples: tuple[float, ...]) -> list[float]:
    """The values ``m * 10**k`` (``m`` in ``multiples``) from the last at or below ``smallest`` to the first at or
    above ``largest``; two values at least."""
    exponents = range(math.floor(math.log10(smallest)) - 1, math.ceil(math.log10(largest)) + 2)
    values = [m * 10.0**e for e in exponents for m in multiples]
    start = max(i for i, v in enumerate(values) if v <= smallest * (1 + 1e-9))
    stop = min(i for i, v in enumerate(values) if v >= largest * (1 - 1e-9))
    return values[start : max(stop, start + 1) + 1]


def _time_ticks(smallest: float, largest: float) -> list[float]:
    """Ticks of the time axis enclosing ``[smallest, largest]``: 1-2-5 steps, or decades (every ``k``-th one when
    there are many) if that gives more than :data:`TIME_TICKS`."""
    ticks = _log_sequence(smallest, largest, (1.0, 2.0, 5.0))
    if len(ticks) <= TIME_TICKS:
        return ticks
    decades = _log_sequence(smallest, largest, (1.0,))
    stride = math.ceil((len(decades) - 1) / (TIME_TICKS - 1))
    return [decades[0] * 10.0 ** (stride * k) for k in range(math.ceil((len(decades) - 1) / stride) + 1)]


def _time_axis(ax: Axes, seconds: list[float]) -> None:
    """Log axis from the first to the last of :func:`_time_ticks`, labelled as plain numbers."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ticks = _time_ticks(min(seconds), max(seconds))
    ax.set_xscale("log")
    ax.set_xlim(ticks[0] / TIME_PAD, ticks[-1] * TIME_PAD)  # the end ticks inside, the end markers whole
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_locator(NullLocator())


def regression_figure(result: dict) -> Figure:
    """Each method's checkpoints (training seconds, test metric) as a line, the predict-the-mean baseline as a
    dashed line; one legend for the whole figure, below the panels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    datasets = result["datasets"]
    figure = Figure(figsize=(4.0 * len(datasets), 6.5), layout="constrained")
    FigureCanvasAgg(figure)  # attaches itself to the figure
    axes = figure.subplots(len(PANELS), len(datasets), squeeze=False)
    for column, (name, data) in enumerate(datasets.items()):
        curves = {
            method: [p for p in record["checkpoints"] if p["train_s"] > 0] for method, record in data["methods"].items()
        }
        seconds = [p["train_s"] for points in curves.values() for p in points]
        for row, (key, label, log_kind) in enumerate(PANELS):
            ax = axes[row, column]
            for method, points in curves.items():
                ax.plot([p["train_s"] for p in points], [p[key] for p in points], marker="o", label=method)
            ax.axhline(data["baseline"][key], color="grey", linestyle="--", linewidth=1, label="mean")
            if seconds:
                _time_axis(ax, seconds)
            values = [p[key] for points in curves.values() for p in points] + [data["baseline"][key]]
            _metric_axis(ax, values, log_kind)
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        axes[0, column].set_title(f"{name} (N={data['train_points']}, d={data['inputs']})")
        axes[-1, column].set_xlabel("training seconds")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 5), fontsize="small")
    return figure


def plot_regression(result: dict, path: str | Path) -> None:
    """Write :func:`regression_figure` to ``path``."""
    regression_figure(result).savefig(path)
