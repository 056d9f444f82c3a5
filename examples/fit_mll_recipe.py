"""Accuracy per second: ``gprf.fit_mll`` against plain Adam on the same model, for the same wall clock.

Protocol: one ``ScaleKernel(RandomFourierKernel(F, orthogonal))`` GP with a constant mean and a Gaussian likelihood,
built twice from the same draw and GPyTorch's initial hyperparameters, then trained for ``--budget`` seconds each

* **adam**: Adam (lr 0.1) on the full marginal likelihood, every step at full N and F;
* **fit_mll**: ``gprf.fit_mll(mll, time_budget=budget)``: Adam with a 512-feature prefix of the same draw on a
  4096-row subsample, then the full draw with the outputscale, noise and mean refitted exactly.

Test RMSE and NLL (per point, noise included) are taken during training (``--checkpoints`` times, not counted
in the clock) and printed at the end; ``--plot`` draws them against training seconds.

Data: ``--data file.npz`` (arrays ``x``, ``y``) or ``file.csv`` (header row, target last), subsampled to
``--max-n`` rows; without ``--data``, a synthetic set: x uniform in [-1, 1]^8, y = sum_j sin(2 x_j + j x_{j+1}) / 2
+ 0.1 noise. Inputs and target are standardised with training statistics; 10% of the rows are held out.

Usage::

    python examples/fit_mll_recipe.py                                  # synthetic, N = 12,000, F = 4096, 60 s each
    python examples/fit_mll_recipe.py --data kin40k.npz --plot         # figure in ./fit_mll_recipe_output
    python examples/fit_mll_recipe.py --quick                          # smoke run (seconds)
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import gpytorch
import numpy as np
import torch
from _output import add_output_arguments, output_folder, write_outputs

import gprf
from gprf.cli.models import RegressionGP
from gprf.kernels import RandomFourierKernel


def rff_gp(x: torch.Tensor, y: torch.Tensor, num_features: int) -> RegressionGP:
    """``ConstantMean`` + ``ScaleKernel(RandomFourierKernel(F, orthogonal))`` + ``GaussianLikelihood``."""
    d = x.size(-1)
    return RegressionGP(x, y, RandomFourierKernel(num_features, d, sampler="orthogonal", seed=0, ard_num_dims=d))


def load(path: str | None, max_n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if path is None:
        x = rng.uniform(-1, 1, size=(max_n, 8))
        f = sum(np.sin(2 * x[:, j] + j * x[:, j + 1]) for j in range(7)) / 2
        return x, f + 0.1 * rng.standard_normal(max_n)
    if path.endswith(".npz"):
        with np.load(path) as data:
            x, y = np.asarray(data["x"], dtype=np.float64), np.asarray(data["y"], dtype=np.float64).reshape(-1)
    else:
        table = np.genfromtxt(path, delimiter=",", skip_header=1)
        table = table[~np.isnan(table).any(axis=1)]
        x, y = table[:, :-1], table[:, -1]
    rows = rng.permutation(len(y))[:max_n]
    return x[rows], y[rows]


def split(x: np.ndarray, y: np.ndarray, seed: int, dtype: torch.dtype):
    rows = np.random.default_rng(seed + 1).permutation(len(y))
    test, train = rows[: len(y) // 10], rows[len(y) // 10 :]
    mean, std = x[train].mean(0), x[train].std(0) + 1e-12
    y_mean, y_std = y[train].mean(), y[train].std()

    def tensor(values):
        return torch.as_tensor(values, dtype=dtype)

    return (
        tensor((x[train] - mean) / std),
        tensor((y[train] - y_mean) / y_std),
        tensor((x[test] - mean) / std),
        tensor((y[test] - y_mean) / y_std),
    )


def metrics(model: RegressionGP, test_x: torch.Tensor, test_y: torch.Tensor) -> tuple[float, float]:
    training = model.training
    model.train()  # a cold prediction: the caches are rebuilt from the current hyperparameters
    model.eval()
    with torch.no_grad():
        predictive = model.likelihood(model(test_x))
        mean, variance = predictive.mean.double(), predictive.variance.double()
    model.train(training)
    target = test_y.double()
    rmse = (mean - target).square().mean().sqrt().item()
    nll = (0.5 * torch.log(2 * math.pi * variance) + 0.5 * (target - mean).square() / variance).mean().item()
    return rmse, nll


class Recorder:
    """Test metrics at doubling points of a training clock that stops while they are taken."""

    def __init__(self, model: RegressionGP, test_x, test_y, budget: float, count: int):
        self.model, self.test_x, self.test_y = model, test_x, test_y
        self.pending = [budget / 2**k for k in reversed(range(count))]
        self.points: list[tuple[float, float, float]] = []
        self.start, self.paused = time.perf_counter(), 0.0

    def seconds(self) -> float:
        return time.perf_counter() - self.start - self.paused

    def step(self, *_: object) -> None:
        now = self.seconds()
        if self.pending and now >= self.pending[0]:
            while self.pending and now >= self.pending[0]:
                self.pending.pop(0)
            begin = time.perf_counter()
            self.points.append((now, *metrics(self.model, self.test_x, self.test_y)))
            self.paused += time.perf_counter() - begin

    def finish(self) -> None:
        now = self.seconds()
        self.points.append((now, *metrics(self.model, self.test_x, self.test_y)))


def train_adam(model: RegressionGP, recorder: Recorder, budget: float) -> None:
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model.train()
    while recorder.seconds() < budget:
        optimizer.zero_grad()
        (-mll(model(*model.train_inputs), model.train_targets)).backward()
        optimizer.step()
        recorder.step()


def train_recipe(model: RegressionGP, recorder: Recorder, budget: float) -> None:
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    gprf.fit_mll(mll, time_budget=budget, callback=recorder.step, progress=True)


def plot(results: dict, path: Path) -> None:
    """Test RMSE and NLL of each method against training seconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(9, 3.5))
    for name, points in results.items():
        seconds, rmse, nll = zip(*points, strict=True)
        axes[0].plot(seconds, rmse, "o-", label=name)
        axes[1].plot(seconds, nll, "o-", label=name)
    for axis, label in zip(axes, ("test RMSE", "test NLL"), strict=True):
        axis.set_xlabel("training seconds")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
    axes[0].legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="an .npz (x, y) or .csv (target last) file; default: synthetic")
    parser.add_argument(
        "--max-n", type=int, default=12000, help="rows used, a random subsample; 10%% held out (default: 12000)"
    )
    parser.add_argument("--features", type=int, default=4096, help="random Fourier features F (default: 4096)")
    parser.add_argument("--budget", type=float, default=60.0, help="training seconds per method (default: 60)")
    parser.add_argument(
        "--checkpoints",
        type=int,
        default=4,
        help="test evaluations during training, at budget/2^k seconds for k = K-1..0 (default: 4)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1)")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the synthetic data, the subsample and the test split (default: 0)"
    )
    add_output_arguments(parser, "fit_mll_recipe")
    parser.add_argument("--quick", action="store_true", help="N = 3000, F = 1024, 5 s each")
    args = parser.parse_args()
    output = output_folder(parser, args, "fit_mll_recipe") if args.plot else None
    if args.quick:
        args.max_n, args.features, args.budget = 3000, 1024, 5.0
    torch.set_num_threads(args.threads)
    train_x, train_y, test_x, test_y = split(*load(args.data, args.max_n, args.seed), args.seed, torch.float32)
    print(f"N = {len(train_y)} training, {len(test_y)} test points, d = {train_x.size(-1)}, F = {args.features}")

    results = {}
    for name, train in (("adam", train_adam), ("fit_mll", train_recipe)):
        model = rff_gp(train_x, train_y, args.features)
        recorder = Recorder(model, test_x, test_y, args.budget, args.checkpoints)
        train(model, recorder, args.budget)
        recorder.finish()
        results[name] = recorder.points
        seconds, rmse, nll = recorder.points[-1]
        noise = model.likelihood.noise.item()
        print(f"{name:8s} {seconds:6.1f} s  test RMSE {rmse:.4f}  NLL {nll:.4f}  noise {noise:.4g}")

    if args.plot:
        write_outputs(output, "fit_mll_recipe", draw=lambda path: plot(results, path))


if __name__ == "__main__":
    main()
