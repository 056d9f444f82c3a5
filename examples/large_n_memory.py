"""Training memory at large N: an MLL step and ``gprf.fit_mll`` without the N x F root ever in memory.

Data: x uniform in [-1, 1]^8, y = sin(3 x_0) cos(2 x_1) + 0.3 sum_{j >= 2} x_j + 0.05 noise, float32 on the chosen
device. Model: ``ConstantMean`` + ``ScaleKernel(RandomFourierKernel(F, orthogonal))`` + ``GaussianLikelihood``.

Reported (JSON on the last line): the seconds of two MLL steps (forward and backward to every hyperparameter) and of
``gprf.fit_mll(time_budget=...)``, and on CUDA their peak allocated memory above what was allocated before each
(``torch.cuda.max_memory_allocated``), next to the size of the float32 N x F root they avoid. The marginal likelihood
sums the Gram over row chunks with features recomputed in the backward pass (``gprf.settings.feature_chunk_size``).

Usage::

    python examples/large_n_memory.py --n 1000000 --features 4096 --device cuda   # on one GPU
    python examples/large_n_memory.py --n 20000 --features 512                    # a CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import time

import gpytorch
import torch

import gprf
from gprf.cli.models import RegressionGP
from gprf.kernels import RandomFourierKernel


def rff_gp(x: torch.Tensor, y: torch.Tensor, num_features: int) -> RegressionGP:
    """``ConstantMean`` + ``ScaleKernel(RandomFourierKernel(F, orthogonal))`` + ``GaussianLikelihood``."""
    d = x.size(-1)
    return RegressionGP(x, y, RandomFourierKernel(num_features, d, sampler="orthogonal", seed=0, ard_num_dims=d))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=None, help="training points (default: 1000000; --quick: 5000)")
    parser.add_argument("--features", type=int, default=None, help="random features F (default: 4096; --quick: 256)")
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu", help="torch device (default: cuda if any)"
    )
    parser.add_argument("--budget", type=float, default=None, help="fit_mll's seconds (default: 15; --quick: 2)")
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds (small N, F and budget)")
    args = parser.parse_args()
    quick = {"n": 5000, "features": 256, "budget": 2.0} if args.quick else {}
    full = {"n": 1_000_000, "features": 4096, "budget": 15.0}
    for name, default in full.items():
        if getattr(args, name) is None:
            setattr(args, name, quick.get(name, default))
    device, d = torch.device(args.device), 8

    generator = torch.Generator(device=device).manual_seed(0)
    x = torch.rand(args.n, d, device=device, generator=generator) * 2 - 1
    noise = torch.randn(args.n, device=device, generator=generator)
    y = torch.sin(3 * x[:, 0]) * torch.cos(2 * x[:, 1]) + 0.3 * x[:, 2:].sum(-1) + 0.05 * noise
    model = rff_gp(x, y, args.features)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    mll.train()

    def synchronize() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def measured(name: str, fn, out: dict) -> None:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
            baseline = torch.cuda.memory_allocated(device)
        synchronize()
        begin = time.perf_counter()
        fn()
        synchronize()
        out[f"{name}_s"] = time.perf_counter() - begin
        if device.type == "cuda":
            out[f"{name}_peak_extra_GiB"] = (torch.cuda.max_memory_allocated(device) - baseline) / 2**30

    def mll_step() -> None:
        model.zero_grad(set_to_none=True)
        (-mll(model(x), y)).backward()

    result = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "n": args.n,
        "F": args.features,
        "d": d,
        "n_by_F_float32_GiB": args.n * args.features * 4 / 2**30,
    }
    for step in range(2):
        measured(f"mll_step{step}", mll_step, result)
    model.zero_grad(set_to_none=True)
    measured("fit_mll", lambda: gprf.fit_mll(mll, time_budget=args.budget, progress=True), result)
    result["noise"] = model.likelihood.noise.item()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
