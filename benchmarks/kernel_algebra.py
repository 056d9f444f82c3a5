"""``python -m benchmarks.kernel_algebra``: GPyTorch's spellings of sums and products of gprf feature kernels against
gprf's own, in the same run.

For each pair the marginal likelihood's forward and backward pass (gprf's ``MultivariateNormal``) is timed
round-robin, and the two spellings' values are compared (the same feature draws, so the same model):

* sum: ``FeatureSumKernel(ScaleKernel(k1), ScaleKernel(k2))`` (gprf) against ``ScaleKernel(k1) + ScaleKernel(k2)``
  (GPyTorch's ``AdditiveKernel``);
* product: ``ScaleKernel(k1 * k2)`` (gprf's product kernel) against ``ScaleKernel(k1) * k2`` (GPyTorch's
  ``ProductKernel``, whose operators multiply as feature roots).

Reported: median seconds, the ratio GPyTorch's spelling / gprf's, and the largest difference of the MLL values.
"""

from __future__ import annotations

import argparse
import statistics
import warnings

import gpytorch
import torch
from gpytorch.kernels import ScaleKernel

import gprf
from benchmarks.timing import interleaved_timings
from gprf.cli.report import format_table
from gprf.kernels import FeatureSumKernel, RandomFourierKernel


class _GP(gpytorch.models.ExactGP):
    def __init__(self, x: torch.Tensor, y: torch.Tensor, kernel: gpytorch.kernels.Kernel) -> None:
        super().__init__(x, y, gpytorch.likelihoods.GaussianLikelihood())
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = kernel

    def forward(self, x: torch.Tensor) -> gprf.distributions.MultivariateNormal:
        return gprf.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _parts(d: int, f: int) -> tuple[RandomFourierKernel, RandomFourierKernel]:
    first = RandomFourierKernel(f, num_dims=d, ard_num_dims=d, seed=1)
    second = RandomFourierKernel(f, num_dims=d, ard_num_dims=d, kernel="matern52", seed=2)
    return first, second


def spellings(d: int, f: int) -> dict[str, dict[str, gpytorch.kernels.Kernel]]:
    """The kernels of each pair, gprf's spelling first; both spellings of a pair share the same feature draws."""
    k1, k2 = _parts(d, f)
    sum_native = FeatureSumKernel(ScaleKernel(k1), ScaleKernel(k2))
    k1, k2 = _parts(d, f)
    sum_gpytorch = ScaleKernel(k1) + ScaleKernel(k2)
    k1, k2 = _parts(d, f)
    product_native = ScaleKernel(k1 * k2)
    k1, k2 = _parts(d, f)
    product_gpytorch = ScaleKernel(k1) * k2
    return {
        "sum": {"gprf": sum_native, "gpytorch": sum_gpytorch},
        "product": {"gprf": product_native, "gpytorch": product_gpytorch},
    }


def _step(model: _GP, x: torch.Tensor, y: torch.Tensor):
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)

    def step() -> float:
        model.zero_grad(set_to_none=True)
        loss = -mll(model(x), y)
        loss.backward()
        return loss.item()

    return step


def run(n: int, d: int, f: int, repeats: int, warmup: int) -> list[dict]:
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(n, d, generator=generator, dtype=torch.float64) * 2 - 1
    y = torch.sin(3 * x).sum(-1) + 0.1 * torch.randn(n, generator=generator, dtype=torch.float64)
    rows = []
    for name, pair in spellings(d, f).items():
        models = {spelling: _GP(x, y, kernel).double().train() for spelling, kernel in pair.items()}
        steps = {spelling: _step(model, x, y) for spelling, model in models.items()}
        with warnings.catch_warnings():
            # GPyTorch's ProductKernel of two random kernels warns once about its own prediction strategy.
            warnings.simplefilter("ignore", gprf.DispatchFallbackWarning)
            values = {spelling: step() for spelling, step in steps.items()}
            times = interleaved_timings(steps, torch.device("cpu"), repeats, warmup)
        medians = {spelling: statistics.median(seconds) for spelling, seconds in times.items()}
        rows.append(
            {
                "expression": name,
                "gprf_s": medians["gprf"],
                "gpytorch_s": medians["gpytorch"],
                "ratio": medians["gpytorch"] / medians["gprf"],
                "mll_difference": abs(values["gpytorch"] - values["gprf"]),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kernel_algebra", description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=3000, help="training points (default: 3000)")
    parser.add_argument("--d", type=int, default=4, help="input dimension (default: 4)")
    parser.add_argument("--features", type=int, default=256, help="features per part (default: 256)")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per spelling (default: 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first (default: 1)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = run(args.n, args.d, args.features, args.repeats, args.warmup)
    print(
        f"MLL forward + backward, N = {args.n}, d = {args.d}, F = {args.features} per part, float64, "
        f"{args.threads} thread(s); median of {args.repeats}"
    )
    print(
        format_table(
            ["expression", "gprf s", "GPyTorch s", "GPyTorch / gprf", "|MLL difference|"],
            [
                [r["expression"], f"{r['gprf_s']:.4f}", f"{r['gpytorch_s']:.4f}", f"{r['ratio']:.2f}"]
                + [f"{r['mll_difference']:.1e}"]
                for r in rows
            ],
        )
    )


if __name__ == "__main__":
    main()
