"""Train and predict with a random-feature GP whose rows are sharded over processes (``torch.distributed``).

Each rank draws its own shard of a synthetic regression problem, builds the same model (the same feature seed),
tunes it with ``gprf.fit_mll`` on the sharded marginal likelihood, and predicts its own test shard from the whole
data's posterior; rank 0 prints the whole test set's RMSE. The same script runs on one process or many, on CPUs
(gloo) or one GPU per process (``--backend nccl``).

Under torchrun (one host, K processes; several hosts: see docs/distributed.rst)::

    torchrun --standalone --nproc_per_node=2 examples/distributed_training.py

Without torchrun the script starts its own gloo processes on this machine::

    python examples/distributed_training.py --processes 2

It writes files only with ``--out DIR``: rank 0's checkpoint of the trained model (``model.pt``, a ``state_dict`` that
restores the model on any number of processes) and the printed numbers (``result.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
from pathlib import Path

import gpytorch
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import gprf
import gprf.distributed
from gprf.kernels import RandomFourierKernel


class ShardGP(gpytorch.models.ExactGP):
    """The user's ``ExactGP``: only the kernel is gprf's."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, num_features: int) -> None:
        super().__init__(x, y, gpytorch.likelihoods.GaussianLikelihood())
        self.mean_module = gpytorch.means.ConstantMean()
        # The same seed on every rank: every rank holds the same feature draw (checked by the sharded MLL).
        kernel = RandomFourierKernel(num_features, num_dims=x.size(-1), ard_num_dims=x.size(-1), seed=0)
        self.covar_module = gpytorch.kernels.ScaleKernel(kernel)

    def forward(self, x: torch.Tensor) -> gprf.distributions.MultivariateNormal:
        return gprf.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def shard(rank: int, rows: int, dims: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's rows of a smooth function plus noise (each rank its own generator: no rows are shared)."""
    generator = torch.Generator().manual_seed(seed * 1000 + rank)
    x = torch.rand(rows, dims, generator=generator, dtype=torch.float64) * 4 - 2
    y = torch.sin(2 * x[:, 0]) * torch.cos(x[:, 1:].sum(-1)) + 0.1 * torch.randn(rows, generator=generator)
    return x, y.to(torch.float64)


def train_and_predict(rank: int, world_size: int, device: torch.device, args: argparse.Namespace) -> None:
    x, y = (
        value.to(device)
        for value in shard(rank, args.rows_per_process + args.test_rows_per_process, args.dims, args.seed)
    )
    train_x, train_y = x[: args.rows_per_process], y[: args.rows_per_process]
    test_x, test_y = x[args.rows_per_process :], y[args.rows_per_process :]
    model = ShardGP(train_x, train_y, args.features).double().to(device)
    mll = gprf.distributed.ShardedMarginalLogLikelihood(model.likelihood, model)
    # fit_mll sees the whole data through the sharded MLL: its subsample is drawn across ranks, its clock agreed.
    gprf.fit_mll(mll, tune_rows=args.tune_rows, time_budget=args.time_budget, progress=rank == 0)
    predictor = gprf.distributed.sharded_predictor(model)  # the whole data's F x F posterior, on every rank
    mean, _ = predictor.predict(test_x)
    totals = torch.stack([(mean - test_y).square().sum(), mean.new_tensor(float(test_y.numel()))])
    dist.all_reduce(totals)
    if rank != 0:
        return
    result = {
        "processes": world_size,
        "training_rows": world_size * args.rows_per_process,
        "test_rmse": math.sqrt(totals[0] / totals[1]),
        "noise": model.likelihood.noise.item(),
    }
    print(
        f"{result['processes']} process(es), {result['training_rows']} training rows in all: "
        f"test RMSE {result['test_rmse']:.4f}, learned noise {result['noise']:.4f}"
    )
    if args.out is not None:
        # Every rank holds the same hyperparameters and feature draw: rank 0's state is the model's.
        args.out.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), args.out / "model.pt")
        (args.out / "result.json").write_text(json.dumps(result, indent=2) + "\n")


def run(rank: int, world_size: int, local_rank: int, args: argparse.Namespace, **group_options) -> None:
    """Join the process group and train; NCCL ranks each on their own GPU (``local_rank`` on this host)."""
    device = torch.device("cpu")
    if args.backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, rank=rank, world_size=world_size, **group_options)
    try:
        train_and_predict(rank, world_size, device, args)
    finally:
        dist.destroy_process_group()


def _spawned(rank: int, world_size: int, store: str, args: argparse.Namespace) -> None:
    torch.set_num_threads(1)
    run(rank, world_size, rank, args, init_method=f"file://{store}")


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line's settings, ``--quick`` applied."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--processes", type=int, default=2, help="processes to start when not run by torchrun (default: 2)"
    )
    parser.add_argument("--rows-per-process", type=int, default=20000, help="training rows per process")
    parser.add_argument("--test-rows-per-process", type=int, default=2000, help="test rows per process")
    parser.add_argument("--dims", type=int, default=4, help="input dimension (default: 4)")
    parser.add_argument("--features", type=int, default=1024, help="random features F (default: 1024)")
    parser.add_argument("--tune-rows", type=int, default=4096, help="fit_mll's tuning subsample, all ranks together")
    parser.add_argument("--time-budget", type=float, default=None, help="fit_mll's time budget in seconds")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data (default: 0)")
    parser.add_argument(
        "--backend", choices=("gloo", "nccl"), default="gloo", help="gloo (CPU) or nccl (one GPU per process)"
    )
    parser.add_argument("--out", type=Path, default=None, help="folder for rank 0's checkpoint and result.json")
    parser.add_argument("--quick", action="store_true", help="a small run (2,000 rows per process, F = 128)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows_per_process, args.test_rows_per_process, args.features, args.tune_rows = 2000, 200, 128, 1000
    if args.processes < 1:
        parser.error(f"--processes must be at least 1, got {args.processes}")
    return args


def main() -> None:
    args = parse_arguments()
    if "RANK" in os.environ:  # started by torchrun, which sets the rendezvous variables
        run(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"]), args)
        return
    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(_spawned, args=(args.processes, os.path.join(folder, "store"), args), nprocs=args.processes)


if __name__ == "__main__":
    main()
