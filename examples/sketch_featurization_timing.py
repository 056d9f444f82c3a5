"""Featurization time of TensorSRHT vs the dense Rademacher sketch, and its O(F log d) scaling.

Times the forward pass of :class:`gprf.features.PolynomialSketch` (``x -> Phi(x)``, no kernel matrix)
for ``sketch="srht"`` (TensorSRHT: fast Walsh–Hadamard transforms, ``O(p F log d)`` per point) and
``sketch="rademacher"`` (a dense ``d x F`` matrix per degree, ``O(p d F)`` per point), real and complex,
measured in the same run:

* N = 10,000 random unit-norm inputs, d = 1024, F = 4096 (complex maps: 4096 complex features), p = 3;
* float32 by default (``--dtype float64`` for double precision);
* ``torch.no_grad()``; rows are featurized in chunks of ``--chunk`` (default 256, the same for both
  sketches) into a preallocated output: an ``N x F`` float64 intermediate is 330 MB, and TensorSRHT is
  memory-bound (``log2 d`` butterfly passes over a ``chunk x F`` tensor per degree), so it runs faster
  when its intermediates fit in cache (with ``--chunk 1000`` TensorSRHT was about 1.8x slower and the
  dense sketch about 4% faster);
* median (and minimum) of ``--repeats`` timed passes after ``--warmup`` untimed ones, TensorSRHT and the
  dense sketch timed in turn within every repeat (so load changes hit both alike);
* then the scaling in the input dimension: real TensorSRHT and dense Rademacher at
  d in {256, 512, 1024, 2048} with F fixed, with the time divided by ``F log2 d`` and by ``F d``.

Prints markdown tables and writes them to ``sketch_featurization_timing.md`` in ``--out DIR``; ``--plot`` adds
``sketch_featurization_timing.png``. Timings depend on the machine and its load: compare the numbers of one run only.

Usage::

    python examples/sketch_featurization_timing.py --out results/ --plot     # about 2 min on 2 CPU cores
    python examples/sketch_featurization_timing.py --out results/ --quick    # a few seconds (smoke test)
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from _output import add_output_arguments, output_folder, write_outputs

from gprf.features import PolynomialSketch

DTYPES = {"float32": torch.float32, "float64": torch.float64}
VARIANTS = (("srht", False), ("rademacher", False), ("srht", True), ("rademacher", True))
NAMES = {"srht": "TensorSRHT", "rademacher": "dense Rademacher"}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def unit_inputs(num_points: int, dim: int, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(num_points, dim, generator=generator, dtype=torch.float64)
    return (x / x.norm(dim=-1, keepdim=True)).to(device=device, dtype=dtype)


@torch.no_grad()
def time_featurization(feature_maps: dict, x: torch.Tensor, chunk: int, repeats: int, warmup: int) -> dict:
    """(median, min) seconds of featurizing every row of ``x`` into a preallocated output, per map.

    The maps are timed in turn within every repeat (interleaved), so a change of machine load during the
    run affects all of them alike.
    """
    outputs = {}
    for key, feature_map in feature_maps.items():
        dtype = x.dtype
        if feature_map.is_complex:
            dtype = torch.complex64 if x.dtype == torch.float32 else torch.complex128
        outputs[key] = torch.empty(x.size(0), feature_map.num_features, dtype=dtype, device=x.device)
    times = {key: [] for key in feature_maps}
    for index in range(warmup + repeats):
        for key, feature_map in feature_maps.items():
            out = outputs[key]
            _sync(x.device)
            start = time.perf_counter()
            for begin in range(0, x.size(0), chunk):
                out[begin : begin + chunk] = feature_map(x[begin : begin + chunk])
            _sync(x.device)
            if index >= warmup:
                times[key].append(time.perf_counter() - start)
    return {key: (statistics.median(values), min(values)) for key, values in times.items()}


def build(dim: int, num_features: int, degree: int, sketch: str, is_complex: bool, dtype, device, seed: int):
    feature_map = PolynomialSketch(dim, num_features, degree, sketch=sketch, complex=is_complex, seed=seed)
    return feature_map.to(device=device, dtype=dtype)


def main_comparison(args, dtype, device) -> tuple[str, dict]:
    x = unit_inputs(args.points, args.dim, dtype, device, args.seed)
    results = {}
    for is_complex in (False, True):  # real maps, then complex maps (each pair interleaved)
        kind = "complex" if is_complex else "real"
        print(f"  timing {kind} maps at d = {args.dim} ...", file=sys.stderr, flush=True)
        maps = {
            (sketch, is_complex): build(
                args.dim, args.features, args.degree, sketch, is_complex, dtype, device, args.seed + 1
            )
            for sketch in ("srht", "rademacher")
        }
        results.update(time_featurization(maps, x, args.chunk, args.repeats, args.warmup))
        del maps
    lines = [
        f"**Featurization time**, N = {args.points}, d = {args.dim}, F = {args.features}, p = {args.degree}, "
        f"{args.dtype}, {device.type}, median (min) over {args.repeats} runs after {args.warmup} warm-up",
        "",
        "| sketch | median time (s) | min time (s) | points / s | dense / TensorSRHT |",
        "|---|---|---|---|---|",
    ]
    for sketch, is_complex in VARIANTS:
        median, minimum = results[(sketch, is_complex)]
        dense = results[("rademacher", is_complex)][0]
        ratio = f"{dense / median:.2f}×" if sketch == "srht" else "-"
        kind = "complex" if is_complex else "real"
        lines.append(
            f"| {NAMES[sketch]} {kind} | {median:.3f} | {minimum:.3f} | {args.points / median:,.0f} | {ratio} |"
        )
    lines.append("")
    for is_complex in (False, True):
        kind = "complex" if is_complex else "real"
        srht, dense = results[("srht", is_complex)][0], results[("rademacher", is_complex)][0]
        lines.append(
            f"* {kind}: TensorSRHT {srht:.3f} s vs dense Rademacher {dense:.3f} s, ratio dense / TensorSRHT = "
            f"{dense / srht:.2f}"
        )
    lines.append("")
    return "\n".join(lines), results


def scaling(args, dtype, device) -> tuple[str, dict]:
    results = {}
    for dim in args.scaling_dims:
        print(f"  scaling: d = {dim} ...", file=sys.stderr, flush=True)
        x = unit_inputs(args.points, dim, dtype, device, args.seed)
        maps = {
            sketch: build(dim, args.features, args.degree, sketch, False, dtype, device, args.seed + 1)
            for sketch in ("srht", "rademacher")
        }
        for sketch, (median, _) in time_featurization(maps, x, args.chunk, args.repeats, args.warmup).items():
            results[(dim, sketch)] = median
        del maps
    lines = [
        f"**Scaling in d** (real sketches), N = {args.points}, F = {args.features}, p = {args.degree}, {args.dtype}, "
        f"median over {args.repeats} runs; normalised times in ns per point per unit of F log2 d or F d",
        "",
        "| d | TensorSRHT (s) | dense Rademacher (s) | dense / TensorSRHT | TensorSRHT / (F log2 d) | dense / (F d) |",
        "|---|---|---|---|---|---|",
    ]
    for dim in args.scaling_dims:
        srht, dense = results[(dim, "srht")], results[(dim, "rademacher")]
        per_srht = srht / (args.points * args.features * math.log2(dim)) * 1e9
        per_dense = dense / (args.points * args.features * dim) * 1e9
        lines.append(f"| {dim} | {srht:.3f} | {dense:.3f} | {dense / srht:.2f}× | {per_srht:.3f} | {per_dense:.4f} |")
    dims = args.scaling_dims
    if len(dims) > 1:
        first, last = dims[0], dims[-1]
        lines.append("")
        lines.append(
            f"From d = {first} to d = {last} ({last / first:.0f}× larger): TensorSRHT time × "
            f"{results[(last, 'srht')] / results[(first, 'srht')]:.2f} (F log2 d predicts × "
            f"{math.log2(last) / math.log2(first):.2f}), dense time × "
            f"{results[(last, 'rademacher')] / results[(first, 'rademacher')]:.2f} "
            f"(F d predicts × {last / first:.0f})."
        )
    lines.append("")
    return "\n".join(lines), results


def plot(results: dict, dims: list[int], path: Path, args) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(5.2, 3.8), layout="constrained")
    for sketch, marker in (("srht", "o"), ("rademacher", "s")):
        axis.plot(dims, [results[(d, sketch)] for d in dims], marker=marker, label=f"{NAMES[sketch]} (real)")
    axis.set_xscale("log", base=2)
    axis.set_yscale("log")
    axis.set_xticks(dims, [str(d) for d in dims])
    axis.set_xlabel("input dimension d")
    axis.set_ylabel("featurization time (s)")
    axis.set_title(f"N = {args.points}, F = {args.features}, p = {args.degree}, {args.dtype}", fontsize=9)
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_output_arguments(parser, "sketch_featurization_timing", tables="sketch_featurization_timing.md")
    parser.add_argument("--quick", action="store_true", help="fewer points and repeats (smoke test)")
    parser.add_argument("--points", type=int, default=None, help="N (default 10000; --quick: 1000)")
    parser.add_argument("--dim", type=int, default=1024, help="input dimension of the main comparison (default: 1024)")
    parser.add_argument("--features", type=int, default=4096, help="F (complex maps: complex features) (default: 4096)")
    parser.add_argument("--degree", type=int, default=3, help="polynomial degree p (default: 3)")
    parser.add_argument(
        "--dtype", choices=tuple(DTYPES), default="float32", help="dtype of the inputs and maps (default: float32)"
    )
    parser.add_argument("--repeats", type=int, default=None, help="timed runs (default 5; --quick: 2)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs before timing (default: 1)")
    parser.add_argument("--chunk", type=int, default=256, help="rows featurized at once (both sketches) (default: 256)")
    parser.add_argument(
        "--scaling-dims",
        type=int,
        nargs="+",
        default=[256, 512, 1024, 2048],
        help="input dimensions d of the scaling-in-d table (default: 256 512 1024 2048)",
    )
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cuda (default: cpu)")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the random inputs; the sketches use seed + 1 (default: 0)"
    )
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    args = parser.parse_args(argv)
    args.points = args.points or (1000 if args.quick else 10_000)
    args.repeats = args.repeats or (2 if args.quick else 5)
    if min(args.points, args.dim, args.features, args.repeats, args.chunk, *args.scaling_dims) < 1 or args.degree < 0:
        parser.error("--points, --dim, --features, --repeats, --chunk and --scaling-dims must be >= 1, --degree >= 0")
    if args.warmup < 0:
        parser.error("--warmup must be >= 0")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    dtype, device = DTYPES[args.dtype], torch.device(args.device)

    output = output_folder(parser, args, "sketch_featurization_timing")
    start = time.perf_counter()
    header = (
        f"Machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, "
        f"torch {torch.__version__}, device {device}\n"
    )
    print(header)
    comparison, _ = main_comparison(args, dtype, device)
    print(comparison)
    scaling_text, scaling_results = scaling(args, dtype, device)
    print(scaling_text)

    draw = (lambda path: plot(scaling_results, args.scaling_dims, path, args)) if args.plot else None
    write_outputs(
        output,
        "sketch_featurization_timing",
        table=header + "\n" + comparison + "\n" + scaling_text,
        draw=draw,
        started=start,
    )


if __name__ == "__main__":
    main()
