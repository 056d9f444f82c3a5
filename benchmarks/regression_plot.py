"""``--plot`` of ``--what regression``: test NLL and RMSE against training time, one column per dataset.

Drawn on a bare :class:`matplotlib.figure.Figure` (Agg canvas, no ``pyplot``): no global backend switch and no
window, whatever the caller's matplotlib setup.
"""

from __future__ import annotations

from pathlib import Path

#: Rows of the figure: the JSON key, the axis label and the y scale (NLL can be negative and, for a method whose
#: variances break down, huge: symmetric log, linear within +-1).
PANELS = (("nll", "test NLL", {"value": "symlog", "linthresh": 1.0}), ("rmse", "test RMSE", {"value": "log"}))


def plot_regression(result: dict, path: str | Path) -> None:
    """Each method's checkpoints (training seconds, test metric) as a line, the predict-the-mean baseline as a
    dashed line; logarithmic time axis (the checkpoints double)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    datasets = result["datasets"]
    figure = Figure(figsize=(4.0 * len(datasets), 6.5), layout="constrained")
    axes = figure.subplots(len(PANELS), len(datasets), squeeze=False, sharex="col")
    for column, (name, data) in enumerate(datasets.items()):
        for row, (key, label, scale) in enumerate(PANELS):
            ax = axes[row, column]
            for method, record in data["methods"].items():
                points = [p for p in record["checkpoints"] if p["train_s"] > 0]
                ax.plot([p["train_s"] for p in points], [p[key] for p in points], marker="o", label=method)
            ax.axhline(data["baseline"][key], color="grey", linestyle="--", linewidth=1, label="mean")
            ax.set_xscale("log")
            ax.set_yscale(**scale)
            ax.xaxis.set_major_formatter(ScalarFormatter())  # seconds as plain numbers
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        axes[0, column].set_title(f"{name} (N={data['train_points']}, d={data['inputs']})")
        axes[-1, column].set_xlabel("training seconds")
    axes[0, 0].legend(fontsize="small")
    figure.savefig(path)
