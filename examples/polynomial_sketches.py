"""Polynomial sketches compared on real data: relative Frobenius error vs polynomial degree.

Reproduces the kernel-approximation comparison of Wacker, Kanagawa & Filippone (2024, §6.2 and Fig. 6) with the
sketches of
:class:`gprf.features.PolynomialSketch`, on a dataset bundled with scikit-learn (no download):

* digits (1797 x 64, pixel values 0..16; the first ``--points`` rows, default 1000) in the paper's two
  preprocessings: **non-negative** (each row divided by its Euclidean norm) and **centred** (the mean of
  the rows used subtracted, then each row divided by its norm);
* the homogeneous polynomial kernel ``k(x, y) = (x^T y)^p`` (bias 0) for p = 1..10;
* sketches Gaussian, Rademacher, TensorSRHT (real and complex) and TensorSketch (real only);
* ``F`` features (default 1024): complex sketches with ``F`` complex features, compared with real
  sketches with ``F`` real features ("equal F", the paper's comparison) and with ``2F`` real features
  (equal memory: the real root ``[Re Phi, Im Phi]`` of a complex map has ``2F`` columns, the same
  featurization and Gram-matrix cost);
* error ``||K_hat - K||_F / ||K||_F`` with ``K_hat = Re(Phi Phi^H)`` (:func:`gprf.metrics.relative_frobenius_error`),
  mean and standard deviation over ``--draws`` independent feature draws (default 10);
* for TensorSRHT on the non-negative data, also the root-mean-square error predicted by the closed-form
  variances, ``sqrt(sum_ij Var k_hat_ij) / ||K||_F`` (:func:`gprf.features.sketch_variance.sketch_variance`):
  the mean of the measured errors is at most this value (Jensen) and close to it when the error is not
  heavy-tailed.

Prints markdown tables (one per preprocessing, and the complex-vs-real TensorSRHT verdict on the
non-negative data) and writes them to ``polynomial_sketches.md`` in ``--out DIR``; ``--plot`` adds
``polynomial_sketches.png``.

Usage::

    python examples/polynomial_sketches.py --out results/ --plot     # about 2.5 min on 2 idle CPU cores
    python examples/polynomial_sketches.py --out results/ --quick    # a few seconds (smoke test)

Reference: J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal of
Machine Learning Research, 2024 (arXiv:2201.08712).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch
from _output import add_output_arguments, output_folder, write_outputs
from sklearn.datasets import load_digits

from gprf.features import PolynomialSketch
from gprf.features.sketch_variance import sketch_variance
from gprf.metrics import relative_frobenius_error

PREPROCESSINGS = {"nonnegative": "non-negative digits (unit-norm rows)", "centred": "centred digits (unit-norm rows)"}
SKETCH_NAMES = {
    "gaussian": "Gaussian",
    "rademacher": "Rademacher",
    "srht": "TensorSRHT",
    "tensorsketch": "TensorSketch",
}
# (complex, multiple of F): real F, complex F (2F real root columns), real 2F.
VARIANTS_PER_SKETCH = ((False, 1), (True, 1), (False, 2))
# (sketch, complex, multiple of F); TensorSketch is real only.
VARIANTS = [
    (sketch, is_complex, multiple)
    for sketch in SKETCH_NAMES
    for is_complex, multiple in VARIANTS_PER_SKETCH
    if not (is_complex and sketch == "tensorsketch")
]


def variant_label(sketch: str, is_complex: bool, multiple: int, num_features: int) -> str:
    kind = "complex" if is_complex else "real"
    return f"{SKETCH_NAMES[sketch]} {kind}, F = {multiple * num_features}"


def load(preprocessing: str, num_points: int) -> torch.Tensor:
    """The first ``num_points`` digits rows, optionally centred, with unit-norm rows (float64)."""
    x = torch.as_tensor(load_digits().data[:num_points], dtype=torch.float64)
    if preprocessing == "centred":
        x = x - x.mean(dim=0)
    return x / x.norm(dim=-1, keepdim=True)


@torch.no_grad()
def real_root(feature_map: PolynomialSketch, x: torch.Tensor, chunk: int) -> torch.Tensor:
    """``[Re Phi, Im Phi]`` (or ``Phi``), featurized in chunks of rows (TensorSRHT's intermediates stay in cache)."""
    return torch.cat([feature_map.real_features(part) for part in x.split(chunk)])


def errors(
    x: torch.Tensor,
    exact: torch.Tensor,
    degree: int,
    variant: tuple,
    num_features: int,
    draws: int,
    seed: int,
    chunk: int,
) -> torch.Tensor:
    """Relative Frobenius errors of ``draws`` independent maps of one variant, shape ``(draws,)``."""
    sketch, is_complex, multiple = variant
    values = []
    for draw in range(draws):
        feature_map = PolynomialSketch(
            x.size(-1), multiple * num_features, degree, sketch=sketch, complex=is_complex, seed=seed + draw
        )
        root = real_root(feature_map, x, chunk)
        values.append(relative_frobenius_error(root @ root.mT, exact))
    return torch.stack(values)


def predicted_rms(x: torch.Tensor, exact: torch.Tensor, degree: int, variant: tuple, num_features: int) -> float:
    """``sqrt(sum_ij Var k_hat_ij) / ||K||_F`` from the closed-form variances (NaN for TensorSketch)."""
    sketch, is_complex, multiple = variant
    if sketch == "tensorsketch":
        return float("nan")
    squares = x.square()
    norms = squares.sum(-1)
    variance = sketch_variance(
        sketch,
        is_complex,
        "real",
        x @ x.mT,  # c = x_i^T x_j
        norms[:, None] * norms[None, :],  # N = |x_i|^2 |x_j|^2
        squares @ squares.mT,  # S = sum_k x_ik^2 x_jk^2
        degree,
        multiple * num_features,
        PolynomialSketch(x.size(-1), 1, 1, sketch=sketch).padded_dim,
    )
    return (variance.sum().clamp_min(0).sqrt() / torch.linalg.matrix_norm(exact)).item()


def run(num_points: int, num_features: int, degrees: list[int], draws: int, seed: int, chunk: int) -> list[dict]:
    rows = []
    for preprocessing in PREPROCESSINGS:
        x = load(preprocessing, num_points)
        gram = x @ x.mT
        group = [
            {"preprocessing": preprocessing, "n": x.size(0), "d": x.size(1), "variant": variant, "p": {}, "rms": {}}
            for variant in VARIANTS
        ]
        for degree in degrees:
            print(f"  {preprocessing} inputs: degree {degree}/{degrees[-1]} ...", file=sys.stderr, flush=True)
            exact = gram.pow(degree)
            for variant_index, (variant, row) in enumerate(zip(VARIANTS, group, strict=True)):
                draw_seed = seed + 100_000 * variant_index + 1000 * degree
                values = errors(x, exact, degree, variant, num_features, draws, draw_seed, chunk)
                std = values.std().item() if draws > 1 else float("nan")
                row["p"][degree] = (values.mean().item(), std)
                row["rms"][degree] = predicted_rms(x, exact, degree, variant, num_features)
        rows += group
    return rows


def _groups(rows: list[dict]) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row["preprocessing"], []).append(row)
    return groups


def _cell(mean: float, std: float) -> str:
    if mean < 1e-8:
        return f"{mean:.1e}"
    return f"{mean:.3g} ± {std:.2g}"


def markdown_table(rows: list[dict], num_features: int, draws: int) -> str:
    lines = []
    for preprocessing, group in _groups(rows).items():
        first = group[0]
        degrees = list(first["p"])
        lines.append(
            f"**{PREPROCESSINGS[preprocessing]}** (n = {first['n']}, d = {first['d']}), kernel (x^T y)^p, "
            f"relative Frobenius error, mean ± std over {draws} draws"
        )
        lines.append("")
        lines.append("| sketch | " + " | ".join(f"p = {p}" for p in degrees) + " |")
        lines.append("|---|" + "---|" * len(degrees))
        for row in group:
            cells = [_cell(*row["p"][p]) for p in degrees]
            lines.append(f"| {variant_label(*row['variant'], num_features)} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def srht_verdict(rows: list[dict], num_features: int, draws: int) -> str:
    """Complex vs real TensorSRHT at equal F on the non-negative data, one verdict per degree."""
    by_variant = {row["variant"]: row for row in _groups(rows)["nonnegative"]}
    real, complex_, real2 = (by_variant[("srht", is_complex, multiple)] for is_complex, multiple in VARIANTS_PER_SKETCH)
    f, f2 = num_features, 2 * num_features
    lines = [
        f"**Complex vs real TensorSRHT on non-negative digits** (equal F = {f}; measured: mean ± std over {draws} "
        "draws; z: difference of the means in standard errors; closed form: sqrt(sum Var)/||K||_F)",
        "",
        f"| p | real, F = {f} | complex, F = {f} | real / complex | z | verdict (equal F) | real, F = {f2} "
        f"| closed form: real, F = {f} | complex, F = {f} | real, F = {f2} |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in real["p"]:
        (mr, sr), (mc, sc), (m2, s2) = real["p"][p], complex_["p"][p], real2["p"][p]
        if mr < 1e-8 and mc < 1e-8:
            ratio, z, verdict = "-", "-", "both exact (F is a multiple of d)"
        else:
            ratio = f"{mr / mc:.2f}" if mc > 0 else "inf"
            verdict = "complex lower" if mc < mr else "**real lower**"
            if draws > 1:
                z_value = (mr - mc) / math.sqrt((sr**2 + sc**2) / draws)
                z = f"{z_value:.1f}"
                if abs(z_value) < 2:
                    verdict += " (within 2 standard errors)"
            else:
                z = "-"
        closed = " | ".join(f"{row['rms'][p]:.3g}" for row in (real, complex_, real2))
        lines.append(
            f"| {p} | {_cell(mr, sr)} | {_cell(mc, sc)} | {ratio} | {z} | {verdict} | {_cell(m2, s2)} | {closed} |"
        )
    lines.append("")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path, num_features: int, draws: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = _groups(rows)
    colors = dict(zip(SKETCH_NAMES, ("tab:blue", "tab:orange", "tab:green", "tab:red"), strict=True))
    styles = {(False, 1): ("-", "o"), (True, 1): ("--", "s"), (False, 2): (":", "^")}
    figure, axes = plt.subplots(1, len(groups), figsize=(6.0 * len(groups), 5.4), squeeze=False, layout="constrained")
    for axis, (preprocessing, group) in zip(axes[0], groups.items(), strict=True):
        exact_points = []
        for row in group:
            sketch, is_complex, multiple = row["variant"]
            linestyle, marker = styles[(is_complex, multiple)]
            degrees = [p for p in row["p"] if row["p"][p][0] >= 1e-8]  # exact estimates cannot go on a log axis
            exact_points += [f"{SKETCH_NAMES[sketch]} p = {p}" for p in row["p"] if row["p"][p][0] < 1e-8]
            means = [row["p"][p][0] for p in degrees]
            stds = [row["p"][p][1] for p in degrees]
            axis.errorbar(
                degrees,
                means,
                yerr=[
                    [min(s, 0.9 * m) for m, s in zip(means, stds, strict=True)],
                    stds,
                ],  # keep the bars on the log axis
                color=colors[sketch],
                linestyle=linestyle,
                marker=marker,
                markersize=3,
                capsize=2,
                label=variant_label(*row["variant"], num_features),
            )
        axis.set_yscale("log")
        axis.set_xticks(list(group[0]["p"]))
        axis.set_xlabel("polynomial degree p")
        axis.set_ylabel("relative Frobenius error")
        title = f"{PREPROCESSINGS[preprocessing]}, n = {group[0]['n']}"
        if exact_points:
            title += "\n(not shown, error < 1e-8: " + ", ".join(sorted(set(exact_points))) + ")"
        axis.set_title(title, fontsize=9)
        axis.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    figure.legend(handles, labels, loc="outside lower center", ncol=4, fontsize=8)
    figure.suptitle(
        f"Polynomial sketches of (x^T y)^p on digits, mean ± std over {draws} draws "
        "(solid: real F, dashed: complex F, dotted: real 2F)",
        fontsize=10,
    )
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_output_arguments(parser, "polynomial_sketches", tables="polynomial_sketches.md")
    parser.add_argument("--quick", action="store_true", help="fewer points, features, degrees and draws (smoke test)")
    parser.add_argument("--points", type=int, default=None, help="digits rows used (default 1000; --quick: 150)")
    parser.add_argument("--features", type=int, default=None, help="F (default 1024; --quick: 128)")
    parser.add_argument("--max-degree", type=int, default=None, help="largest p (default 10; --quick: 4)")
    parser.add_argument(
        "--draws", type=int, default=None, help="independent draws per setting (default 10; --quick: 2)"
    )
    parser.add_argument("--seed", type=int, default=0, help="base seed of the feature draws")
    parser.add_argument("--chunk", type=int, default=250, help="rows featurized at once")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    args = parser.parse_args(argv)
    num_points = args.points or (150 if args.quick else 1000)
    num_features = args.features or (128 if args.quick else 1024)
    max_degree = args.max_degree or (4 if args.quick else 10)
    draws = args.draws or (2 if args.quick else 10)
    if num_points < 2 or num_features < 1 or max_degree < 1 or draws < 1 or args.chunk < 1:
        parser.error("--points must be >= 2 and --features, --max-degree, --draws, --chunk >= 1")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float64)  # feature maps draw their buffers in the default dtype

    output = output_folder(parser, args, "polynomial_sketches")
    start = time.perf_counter()
    rows = run(num_points, num_features, list(range(1, max_degree + 1)), draws, args.seed, args.chunk)
    text = markdown_table(rows, num_features, draws) + "\n" + srht_verdict(rows, num_features, draws)
    print(text)

    draw = (lambda path: plot(rows, path, num_features, draws)) if args.plot else None
    write_outputs(output, "polynomial_sketches", table=text, draw=draw, started=start)


if __name__ == "__main__":
    main()
