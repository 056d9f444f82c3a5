r"""Data-parallel training of a random-feature GP on ``torch.distributed``: throughput, scaling efficiency, memory and
communicated bytes of one marginal-likelihood step (forward and backward of
:class:`gprf.distributed.ShardedMarginalLogLikelihood`) over 1, 2, 4, ... processes.

* **Weak scaling**: ``--rows-per-process`` rows on each of :math:`K` processes; efficiency :math:`T_1/T_K` (ideal 1:
  :math:`K` times the rows in the same time).
* **Strong scaling**: ``--total-rows`` rows split over :math:`K` processes; efficiency :math:`T_1/(K\,T_K)`.
* **Bytes per step**, as counted by each process's exchange (:class:`gprf.distributed.CommunicationLog`), against
  :func:`step_bytes`: two headers, the packed sums, :math:`K` fingerprint slots and the :math:`P` hyperparameter
  gradients, in float64 (the factor dtype) whatever the model dtype.
* **Memory**: each process's peak above what it held once its shard and model were built (the data).
* **Time in collectives** per step (the slowest process's; on the CPU, waits for slower processes included): what
  communication and load imbalance cost, against the step time.

``T_K`` is the median over the timed steps of the slowest process's step time. The data are synthetic
(:math:`x \sim U[0, 1]^d`, :math:`y = \sin(\sum_j x_j) + 0.1\varepsilon`), process :math:`r` holding rows
:math:`[rn, (r+1)n)` of one seeded stream (:func:`data_rows`), so the strong-scaling runs share one data set; the
model is ``ScaleKernel(RandomFourierKernel(F, ARD))`` with a ``GaussianLikelihood`` and a ``ConstantMean``
(:math:`P = d + 3` hyperparameters).

On one host the benchmark spawns its own processes (gloo on the CPU, one thread each unless ``--threads``)::

    python -m benchmarks.distributed --processes 1,2 --rows-per-process 1000000 --total-rows 2000000 \
        --features 1024 --dims 8 --dtype float32

Under ``torchrun`` it measures the one configuration of the launched world (weak scaling at
``--rows-per-process``; compare launches of different sizes), on one host or several::

    torchrun --nproc_per_node=2 -m benchmarks.distributed --rows-per-process 1000000 --features 1024
    torchrun --nnodes=2 --nproc_per_node=4 --rdzv_backend=c10d --rdzv_endpoint=HOST:29500 \
        -m benchmarks.distributed --rows-per-process 1000000 --features 1024 --device cuda
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import gpytorch
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from gpytorch.kernels import ScaleKernel

from benchmarks.memory import current_memory_bytes, peak_memory_bytes, reset_peak_memory
from gprf.distributed import ShardedMarginalLogLikelihood
from gprf.distributed.exchange import HEADER_SIZE
from gprf.kernels import RandomFourierKernel
from gprf.settings import feature_chunk_size

DTYPES = {"float32": torch.float32, "float64": torch.float64}
#: Rows per seeded block of the synthetic data (:func:`data_rows`).
BLOCK_ROWS = 2**16


@dataclass(frozen=True)
class Config:
    """One measurement: ``rows`` per process on ``world_size`` processes."""

    rows: int
    features: int
    dims: int
    dtype: str
    steps: int
    warmup: int
    threads: int
    device: str
    chunk_rows: int | None = None


def step_bytes(features: int, dims: int, world_size: int, factor_bytes: int = 8) -> int:
    r"""Bytes one process hands to collectives per marginal-likelihood step (forward and backward):

    .. math::
        b\,\big(2H + F(F+1)/2 + F + 2 + K(F + 2) + P\big),

    with :math:`b` the bytes of the factor dtype (8), :math:`H` the header's numbers (16, one header before the
    forward sum and one before the gradient sum), the lower triangle of :math:`G`, :math:`b`, :math:`q` and
    :math:`\sum\log\sigma^2` (:math:`F(F+1)/2 + F + 2`), :math:`K` fingerprint slots of :math:`F + 2` and the
    :math:`P = d + 3` hyperparameter gradients (lengthscales, outputscale, noise, constant).
    """
    summed = features * (features + 1) // 2 + features + 2
    return factor_bytes * (2 * HEADER_SIZE + summed + world_size * (features + 2) + dims + 3)


class _GP(gpytorch.models.ExactGP):
    def __init__(self, x: torch.Tensor, y: torch.Tensor, features: int):
        super().__init__(x, y, gpytorch.likelihoods.GaussianLikelihood())
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = ScaleKernel(
            RandomFourierKernel(features, num_dims=x.size(-1), ard_num_dims=x.size(-1), seed=0)
        )

    def forward(self, x: torch.Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def data_rows(start: int, stop: int, dims: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows ``start:stop`` of one endless synthetic data set, drawn in seeded blocks of :data:`BLOCK_ROWS`: a rank
    draws only the blocks its rows fall in, and :math:`K` ranks' shards of :math:`N` rows are the rows one process
    holding all :math:`N` would have."""
    inputs, targets = [], []
    for block in range(start // BLOCK_ROWS, (stop - 1) // BLOCK_ROWS + 1):
        generator = torch.Generator().manual_seed(block)
        x = torch.rand(BLOCK_ROWS, dims, generator=generator, dtype=dtype)
        noise = torch.randn(BLOCK_ROWS, generator=generator, dtype=dtype)
        first, last = block * BLOCK_ROWS, (block + 1) * BLOCK_ROWS
        rows = slice(max(start, first) - first, min(stop, last) - first)
        inputs.append(x[rows])
        targets.append(torch.sin(x[rows].sum(-1)) + 0.1 * noise[rows])
    return torch.cat(inputs), torch.cat(targets)


def _shard(rank: int, config: Config, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = data_rows(rank * config.rows, (rank + 1) * config.rows, config.dims, DTYPES[config.dtype])
    return x.to(device), y.to(device)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(rank: int, world_size: int, config: Config) -> dict:
    """One process's step times, bytes per step and peak memory above its data (``torch.distributed`` initialised)."""
    torch.set_num_threads(config.threads)
    device = torch.device("cuda", torch.cuda.current_device()) if config.device == "cuda" else torch.device("cpu")
    x, y = _shard(rank, config, device)
    model = _GP(x, y, config.features).to(device=device, dtype=x.dtype)
    model.train()
    mll = ShardedMarginalLogLikelihood(model.likelihood, model)
    _synchronize(device)
    data_bytes = current_memory_bytes(device)
    windowed = reset_peak_memory(device)
    times = []
    # None: gprf's own rule (feature_chunk_size "auto": roots of 2^27 entries and more are summed in row chunks).
    chunking = feature_chunk_size("auto" if config.chunk_rows is None else config.chunk_rows)
    for step in range(config.warmup + config.steps):
        for parameter in mll.parameters():
            parameter.grad = None
        begin = time.perf_counter()
        with chunking:
            loss = -mll(model(x), y)
            loss.backward()
        _synchronize(device)
        if step >= config.warmup:
            times.append(time.perf_counter() - begin)
    peak = peak_memory_bytes(device)
    return {
        "rank": rank,
        "times": times,
        "bytes_per_step": mll.exchange.log.bytes() / (config.warmup + config.steps),
        "collective_seconds_per_step": mll.exchange.log.seconds() / (config.warmup + config.steps),
        "peak_above_data": None if data_bytes is None or not windowed else max(peak - data_bytes, 0),
        "loss": float(loss.detach()),
    }


def _spawned(rank: int, world_size: int, folder: str, config: Config) -> None:
    if config.device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl" if config.device == "cuda" else "gloo",
        init_method=f"file://{folder}/store",
        rank=rank,
        world_size=world_size,
        timeout=datetime.timedelta(minutes=30),
    )
    try:
        result = measure(rank, world_size, config)
        Path(folder, f"rank{rank}.json").write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def run_configuration(world_size: int, config: Config) -> list[dict]:
    """:func:`measure` on ``world_size`` processes spawned here (a process group of their own)."""
    with tempfile.TemporaryDirectory() as folder:
        # CUDA cannot be used in a forked child; forked CPU processes start in a fraction of a second.
        method = "spawn" if config.device == "cuda" else "fork"
        mp.start_processes(_spawned, args=(world_size, folder, config), nprocs=world_size, start_method=method)
        return [json.loads(Path(folder, f"rank{rank}.json").read_text()) for rank in range(world_size)]


def summarise(world_size: int, config: Config, results: list[dict]) -> dict:
    """The slowest process's median step time, throughput, bytes (measured and formula) and peak memory."""
    step_seconds = statistics.median(max(steps) for steps in zip(*(r["times"] for r in results), strict=True))
    peaks = [r["peak_above_data"] for r in results]
    return {
        "processes": world_size,
        "rows_per_process": config.rows,
        "total_rows": world_size * config.rows,
        "step_seconds": step_seconds,
        "rows_per_second": world_size * config.rows / step_seconds,
        "bytes_per_step": max(r["bytes_per_step"] for r in results),
        "bytes_formula": step_bytes(config.features, config.dims, world_size),
        # Time in collectives, waits for slower processes included (NCCL returns before the transfer ends).
        "collective_seconds_per_step": max(r["collective_seconds_per_step"] for r in results),
        "peak_above_data_bytes": None if None in peaks else max(peaks),
        "loss": results[0]["loss"],
    }


def with_efficiencies(rows: list[dict], kind: str) -> list[dict]:
    """Each row with its scaling efficiency against the one-process row: weak :math:`T_1/T_K`, strong
    :math:`T_1/(K T_K)`."""
    base = next(row for row in rows if row["processes"] == 1)["step_seconds"]
    scale = (lambda k: 1) if kind == "weak" else (lambda k: k)
    return [{**row, "efficiency": base / (scale(row["processes"]) * row["step_seconds"])} for row in rows]


def _table(title: str, rows: list[dict]) -> str:
    lines = [
        title,
        "  K   rows/proc    step s   rows/s      efficiency  in collectives  bytes/step (formula)   peak above data",
    ]
    for row in rows:
        peak = row["peak_above_data_bytes"]
        peak_text = "n/a" if peak is None else f"{peak / 2**20:.0f} MiB"
        efficiency = row.get("efficiency")
        lines.append(
            f"  {row['processes']:<3} {row['rows_per_process']:<11} {row['step_seconds']:<9.3f} "
            f"{row['rows_per_second']:<11.4g} {'' if efficiency is None else f'{efficiency:.1%}':<11} "
            f"{row['collective_seconds_per_step']:<15.4f} {row['bytes_per_step']:.0f} ({row['bytes_formula']})   "
            f"{peak_text}"
        )
    return "\n".join(lines)


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} CPUs"


def _positive_counts(text: str) -> list[int]:
    counts = [int(part) for part in text.split(",") if part.strip()]
    if not counts or any(count < 1 for count in counts):
        raise argparse.ArgumentTypeError(f"expected positive integers separated by commas, got {text!r}")
    return counts


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.distributed", description=__doc__.split("\n\n")[0].replace("\n", " ")
    )
    parser.add_argument("--processes", type=_positive_counts, default=[1, 2, 4], help="K values (default 1,2,4)")
    parser.add_argument("--rows-per-process", type=int, default=100_000, help="weak scaling: rows on each process")
    parser.add_argument("--total-rows", type=int, default=None, help="strong scaling: rows split over K processes")
    parser.add_argument("--features", type=int, default=256)
    parser.add_argument("--dims", type=int, default=8)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per configuration")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads per process")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cuda: NCCL, one GPU per process")
    parser.add_argument(
        "--chunk-rows", type=int, default=None, help="rows per chunk of the chunked Gram (default: gprf's own rule)"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    for name in ("rows_per_process", "features", "dims", "steps", "threads"):
        if getattr(args, name) < 1:
            _parser().error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0 or (args.total_rows is not None and args.total_rows < max(args.processes)):
        _parser().error("--warmup must be >= 0 and --total-rows at least the largest process count")

    def config(rows: int) -> Config:
        return Config(
            rows,
            args.features,
            args.dims,
            args.dtype,
            args.steps,
            args.warmup,
            args.threads,
            args.device,
            args.chunk_rows,
        )

    if "WORLD_SIZE" in os.environ and not dist.is_initialized():  # launched by torchrun: this world only
        dist.init_process_group("nccl" if args.device == "cuda" else "gloo")
        if args.device == "cuda":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        world_size, rank = dist.get_world_size(), dist.get_rank()
        result = measure(rank, world_size, config(args.rows_per_process))
        gathered = [None] * world_size
        dist.all_gather_object(gathered, result)
        dist.destroy_process_group()
        if rank == 0:
            report = {"weak": [summarise(world_size, config(args.rows_per_process), gathered)], "load": _load()}
            print(_table(f"torchrun world of {world_size} ({_load()})", report["weak"]))
            if args.json is not None:
                args.json.write_text(json.dumps(report, indent=2))
        return 0

    report = {"config": asdict(config(args.rows_per_process)), "load_before": _load()}
    weak = [summarise(k, config(args.rows_per_process), run_configuration(k, config(args.rows_per_process)))
            for k in args.processes]  # fmt: skip
    report["weak"] = with_efficiencies(weak, "weak") if 1 in args.processes else weak
    if args.total_rows is not None:
        strong = [summarise(k, config(args.total_rows // k), run_configuration(k, config(args.total_rows // k)))
                  for k in args.processes]  # fmt: skip
        report["strong"] = with_efficiencies(strong, "strong") if 1 in args.processes else strong
    report["load_after"] = _load()
    print(f"F = {args.features}, d = {args.dims}, {args.dtype}, {args.device}; {report['load_before']}")
    print(_table("weak scaling (fixed rows per process)", report["weak"]))
    if "strong" in report:
        print(_table("strong scaling (fixed total rows)", report["strong"]))
    print(f"after: {report['load_after']}")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
