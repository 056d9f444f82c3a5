"""The figure of the closed-loop BO benchmarks (``--what bo`` and ``small-bo``): the best value found, averaged over
seeds, against evaluations and against modelling seconds."""

from __future__ import annotations

import statistics


def plot_best_values(runs: dict[str, list[dict]], title: str, path, markersize: int) -> None:
    """One line per method of ``runs`` (method -> the runs of its seeds, each with ``best``, ``evaluations`` and
    cumulative ``seconds`` per iteration), over the iterations every seed reached; written to ``path``."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 4))
    by_evaluations, by_seconds = figure.subplots(1, 2)
    for method, per_seed in runs.items():
        length = min(len(run["best"]) for run in per_seed)
        mean_best = [statistics.mean(run["best"][i] for run in per_seed) for i in range(length)]
        mean_seconds = [statistics.mean(run["seconds"][i] for run in per_seed) for i in range(length)]
        by_evaluations.plot(
            per_seed[0]["evaluations"][:length], mean_best, marker="o", markersize=markersize, label=method
        )
        by_seconds.plot(mean_seconds, mean_best, marker="o", markersize=markersize, label=method)
    by_evaluations.set(xlabel="evaluations", ylabel="best value (mean over seeds)", title=title)
    by_seconds.set(xlabel="modelling seconds (fit + acquisition)", ylabel="best value (mean over seeds)")
    by_evaluations.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
