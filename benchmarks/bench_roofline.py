r"""``--what mll`` roofline: the MLL step against the matrix-multiply rate measured in the same run.

The marginal-likelihood step of a random-feature GP with :math:`N` points and :math:`F` features is
dominated by the Gram matrix :math:`R^\top\Sigma^{-1}R` (a symmetric rank-:math:`N` update, :math:`NF^2`
flops) and its backward pass (one :math:`N\times F` by :math:`F\times F` product, :math:`2NF^2` flops):
:math:`3NF^2` flops in all. Timing an :math:`N\times F` by :math:`F\times F` GEMM of the benchmark's own
sizes, device and dtype gives the rate :math:`r` the machine actually reaches, and
:math:`t_\text{MLL} / (3NF^2 / r)` says how far a step is from that bound (1 = at the roofline).
The Gram product :math:`R^\top R` (:math:`F\times N` by :math:`N\times F`) is timed too, for reference.
"""

from __future__ import annotations

import statistics

import torch

from benchmarks.timing import interleaved_timings
from gprf.cli.report import format_number, format_seconds, format_table

#: GEMM shapes timed: name -> description (``a @ b`` with ``a`` and ``b`` drawn below).
GEMMS = {
    "RW": "N x F @ F x F (backward-pass GEMM)",
    "RtR": "F x N @ N x F (Gram matrix R^T R)",
}


def mll_flops(n: int, f: int) -> float:
    """Floating-point operations of one MLL step's dominant work: :math:`3NF^2`."""
    return 3.0 * n * f * f


def gemm_rates(
    n: int, f: int, device: torch.device, dtype: torch.dtype, repeats: int, warmup: int, seed: int
) -> dict[str, dict[str, float]]:
    """Median seconds and achieved rate (flop/s, :math:`2NF^2` flops each) of the :data:`GEMMS`."""
    # Drawn on the device in the benchmark's dtype: at N = 10^6, F = 4096 a float64 draw on the CPU would take longer
    # than the benchmark (and 32 GB), and GEMM speed does not depend on the values.
    generator = torch.Generator(device).manual_seed(seed)
    r = torch.randn(n, f, generator=generator, device=device, dtype=dtype)
    w = torch.randn(f, f, generator=generator, device=device, dtype=dtype)
    r_t = r.mT.contiguous()  # a row-major F x N operand, as R^T R is usually computed
    fns = {"RW": lambda: r @ w, "RtR": lambda: r_t @ r}
    times = interleaved_timings(fns, device, repeats, warmup)
    result = {}
    for name, values in times.items():
        median = statistics.median(values)
        result[name] = {"median_s": median, "flops_per_s": 2.0 * n * f * f / median}
    return result


def roofline_report(gemms: dict[str, dict[str, float]], n: int, f: int, mll_medians: dict[str, float]) -> dict:
    """The :math:`3NF^2` bound at the ``RW`` GEMM rate and each random-feature model's MLL step as a multiple."""
    rate = gemms["RW"]["flops_per_s"]
    bound = mll_flops(n, f) / rate
    multiples = {name: mll_medians[name] / bound for name in ("gprf", "RFFKernel") if name in mll_medians}
    return {"gemm": gemms, "mll_flops": mll_flops(n, f), "bound_s": bound, "multiple_of_bound": multiples}


def render_roofline(roofline: dict, n: int, f: int) -> list[str]:
    rows = [
        [name, GEMMS[name], format_seconds(g["median_s"]), format_number(g["flops_per_s"] / 1e9, 3)]
        for name, g in roofline["gemm"].items()
    ]
    multiples = ", ".join(f"{name} {value:.3g}x" for name, value in roofline["multiple_of_bound"].items())
    return [
        f"roofline: GEMMs of the benchmark's sizes (N={n}, F={f}), median seconds and achieved GFLOP/s",
        "",
        format_table(["gemm", "shape", "seconds", "GFLOP/s"], rows),
        "",
        f"MLL step bound: 3 N F^2 = {roofline['mll_flops']:.3g} flops at the RW rate = "
        f"{format_seconds(roofline['bound_s'])} s; MLL step / bound: {multiples} (1 = at the roofline)",
    ]
