"""Random Fourier feature samplers compared on real data: relative Frobenius error vs number of features.

Reproduces the classic comparison of Yu et al. (2016, Fig. 2) and Yang et al. (2014) on two datasets bundled
with scikit-learn (no download):

* digits (1797 x 64; the first ``--points`` rows) and diabetes (442 x 10);
* inputs divided by the median pairwise distance (the lengthscale heuristic), so typical distances are ~1;
* RBF and Matern-5/2 kernels; samplers iid, orthogonal (ORF), structured (SORF) and qmc (scrambled Sobol);
* F in {d/2, d, 2d, 4d, 8d} rounded up to even numbers (F/2 cosine + F/2 sine features);
* error ``||Phi Phi^T - K||_F / ||K||_F`` (:func:`gprf.metrics.relative_frobenius_error`), mean and standard
  deviation over ``--seeds`` independent feature draws (one ``batch_shape=(seeds,)`` map per setting: its
  batch members are independent draws).

Prints a markdown table and writes it to ``fourier_samplers.md`` in ``--out DIR`` (default ./fourier_samplers_output);
``--plot`` adds ``fourier_samplers.png`` there.

Usage::

    python examples/fourier_samplers.py --out results/ --plot     # < 1 min on 2 CPU cores
    python examples/fourier_samplers.py --out results/ --quick    # a few seconds (smoke test)

References:
    * F. X. Yu, A. T. Suresh, K. Choromanski, D. Holtmann-Rice, S. Kumar. *Orthogonal Random Features.* Advances in
      Neural Information Processing Systems (NeurIPS), 2016.
    * J. Yang, V. Sindhwani, H. Avron, M. W. Mahoney. *Quasi-Monte Carlo Feature Maps for Shift-Invariant Kernels.*
      International Conference on Machine Learning (ICML), 2014.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
from _output import add_output_arguments, output_folder, write_outputs
from sklearn.datasets import load_diabetes, load_digits

from gprf.features import SPECTRA, RandomFourierFeatures
from gprf.metrics import relative_frobenius_error

SAMPLERS = ("iid", "orthogonal", "structured", "qmc")
KERNELS = {"rbf": "RBF", "matern52": "Matérn-5/2"}
MULTIPLES = (0.5, 1, 2, 4, 8)


def load(name: str, num_points: int | None) -> torch.Tensor:
    """Inputs of a scikit-learn dataset divided by their median pairwise distance (float64)."""
    data = load_digits().data if name == "digits" else load_diabetes().data
    x = torch.as_tensor(data, dtype=torch.float64)
    if num_points is not None:
        x = x[:num_points]
    distances = torch.cdist(x, x)
    return x / distances[distances > 0].median()


def feature_counts(dim: int) -> list[int]:
    """F = k d for k in MULTIPLES, rounded up to the next even number."""
    return [2 * math.ceil(k * dim / 2) for k in MULTIPLES]


def errors(x: torch.Tensor, exact: torch.Tensor, kernel: str, sampler: str, num_features: int, seeds: int, seed: int):
    """Relative Frobenius errors of ``seeds`` independent feature draws, shape ``(seeds,)``."""
    feature_map = RandomFourierFeatures(x.size(-1), num_features, kernel, sampler, batch_shape=(seeds,), seed=seed)
    with torch.no_grad():
        features = feature_map(x)  # (seeds, n, F)
        return relative_frobenius_error(features @ features.mT, exact.expand(seeds, -1, -1))


def run(datasets: list[str], num_points: int, seeds: int, seed: int) -> list[dict]:
    rows = []
    for name in datasets:
        x = load(name, num_points if name == "digits" else None)
        distances = torch.cdist(x, x)
        for kernel in KERNELS:
            exact = SPECTRA[kernel].profile(distances)
            for sampler_index, sampler in enumerate(SAMPLERS):
                row = {"dataset": name, "n": x.size(0), "d": x.size(1), "kernel": kernel, "sampler": sampler, "F": {}}
                for num_features in feature_counts(x.size(1)):
                    draw_seed = seed + 1000 * sampler_index + num_features
                    draws = errors(x, exact, kernel, sampler, num_features, seeds, draw_seed)
                    row["F"][num_features] = (draws.mean().item(), draws.std().item() if seeds > 1 else float("nan"))
                rows.append(row)
    return rows


def markdown_table(rows: list[dict], seeds: int) -> str:
    lines = []
    for (name, kernel), group in _groups(rows).items():
        first = group[0]
        counts = list(first["F"])
        lines.append(
            f"**{name}** (n = {first['n']}, d = {first['d']}), {KERNELS[kernel]} kernel, "
            f"relative Frobenius error, mean ± std over {seeds} draws"
        )
        lines.append("")
        lines.append("| sampler | " + " | ".join(f"F = {f}" for f in counts) + " |")
        lines.append("|---|" + "---|" * len(counts))
        for row in group:
            cells = [f"{mean:.4f} ± {std:.4f}" for mean, std in row["F"].values()]
            lines.append(f"| {row['sampler']} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _groups(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["dataset"], row["kernel"]), []).append(row)
    return groups


def plot(rows: list[dict], path: Path, seeds: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = _groups(rows)
    datasets = list(dict.fromkeys(name for name, _ in groups))
    figure, axes = plt.subplots(
        len(datasets),
        len(KERNELS),
        figsize=(4.2 * len(KERNELS), 3.4 * len(datasets)),
        squeeze=False,
        layout="constrained",
    )
    for (name, kernel), group in groups.items():
        axis = axes[datasets.index(name), list(KERNELS).index(kernel)]
        for row in group:
            counts = list(row["F"])
            means = [row["F"][f][0] for f in counts]
            stds = [row["F"][f][1] for f in counts]
            axis.errorbar(counts, means, yerr=stds, marker="o", markersize=3, capsize=3, label=row["sampler"])
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xticks(counts, [str(f) for f in counts])
        axis.set_xlabel("number of features F")
        axis.set_ylabel("relative Frobenius error")
        axis.set_title(f"{name} (d = {group[0]['d']}), {KERNELS[kernel]}", fontsize=10)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(f"Random Fourier feature samplers, mean ± std over {seeds} draws", fontsize=11)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_output_arguments(parser, "fourier_samplers", tables="fourier_samplers.md")
    parser.add_argument("--quick", action="store_true", help="fewer points and draws (smoke test)")
    parser.add_argument("--points", type=int, default=None, help="digits rows used (default 1000; --quick: 300)")
    parser.add_argument(
        "--seeds", type=int, default=None, help="independent draws per setting (default 20; --quick: 3)"
    )
    parser.add_argument("--seed", type=int, default=0, help="base seed of the feature draws")
    parser.add_argument(
        "--datasets",
        nargs="+",
        choices=("digits", "diabetes"),
        default=["digits", "diabetes"],
        help="datasets to run (default: digits diabetes)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    args = parser.parse_args(argv)
    num_points = args.points or (300 if args.quick else 1000)
    seeds = args.seeds or (3 if args.quick else 20)
    if num_points < 2 or seeds < 1:
        parser.error("--points must be >= 2 and --seeds >= 1")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float64)  # feature maps draw their buffers in the default dtype

    output = output_folder(parser, args, "fourier_samplers")
    start = time.perf_counter()
    rows = run(args.datasets, num_points, seeds, args.seed)
    table = markdown_table(rows, seeds)
    print(table)

    draw = (lambda path: plot(rows, path, seeds)) if args.plot else None
    write_outputs(output, "fourier_samplers", table=table, draw=draw, started=start)


if __name__ == "__main__":
    main()
