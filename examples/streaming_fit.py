"""Streaming fit of a random-feature GP on two million points that never sit in memory together.

Protocol:

1. train the hyperparameters of ``ScaleKernel(RandomFourierKernel(F))`` by the exact marginal likelihood on
   a small subsample (the usual GPyTorch loop, in memory);
2. stream N points, generated chunk by chunk from a seeded generator, through
   :class:`gprf.streaming.StreamingFit` with those hyperparameters fixed, and record the test RMSE of the
   posterior at a few checkpoints (a statistics snapshot costs one F x F factorisation);
3. report the peak resident memory of the process (``resource.getrusage(...).ru_maxrss``) and the time;
4. check against the in-memory gprf model on the first ``--check-size`` points (the same data): largest
   absolute difference of the posterior mean and variance on the test set.

Data: x uniform in [0, 1]^d, y = f(x) + 0.1 * noise with f(x) = sum_j sin(3 x_j + j) / sqrt(d).

Usage::

    python examples/streaming_fit.py                   # N = 2e6, d = 8, F = 256: about a minute on 1 thread
    python examples/streaming_fit.py --quick           # smoke run
    python examples/streaming_fit.py --out docs/_static --plot
"""

from __future__ import annotations

import argparse
import math
import resource
import time
from collections.abc import Iterator
from pathlib import Path

import gpytorch
import torch
from _output import add_output_arguments, output_folder, write_outputs
from gpytorch.kernels import ScaleKernel

from gprf.kernels import RandomFourierKernel
from gprf.streaming import StreamingFit, iterate_chunks

NOISE_STD = 0.1


class ExactModel(gpytorch.models.ExactGP):
    def __init__(self, train_x, train_y, num_features: int, seed: int) -> None:
        super().__init__(train_x, train_y, gpytorch.likelihoods.GaussianLikelihood())
        d = train_x.size(-1)
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = ScaleKernel(RandomFourierKernel(num_features, num_dims=d, ard_num_dims=d, seed=seed))

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def target(x: torch.Tensor) -> torch.Tensor:
    phases = torch.arange(x.size(-1), dtype=x.dtype)
    return torch.sin(3 * x + phases).sum(-1) / math.sqrt(x.size(-1))


def sample(n: int, d: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.rand(n, d, generator=generator, dtype=torch.float64)
    return x, target(x) + NOISE_STD * torch.randn(n, generator=generator, dtype=torch.float64)


def data_chunks(num_data: int, d: int, chunk_size: int, seed: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The data set, one chunk at a time: only the current chunk exists in memory."""
    generator = torch.Generator().manual_seed(seed)
    for start in range(0, num_data, chunk_size):
        yield sample(min(chunk_size, num_data - start), d, generator)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def train_hyperparameters(args: argparse.Namespace) -> ExactModel:
    x, y = sample(args.train_size, args.dim, torch.Generator().manual_seed(args.seed + 1))
    model = ExactModel(x, y, args.features, args.seed).double()
    model.train()
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(args.steps):
        optimizer.zero_grad()
        loss = -mll(model(x), y)
        loss.backward()
        optimizer.step()
    return model.eval()


def stream(model: ExactModel, args: argparse.Namespace, test_x, test_f) -> tuple[list[tuple[int, float]], float]:
    fit = StreamingFit.from_model(model)
    checkpoints = sorted({min(args.num_data, c) for c in (args.chunk_size, *args.checkpoints)})
    curve, seen = [], 0
    start = time.perf_counter()
    for x, y in data_chunks(args.num_data, args.dim, args.chunk_size, args.seed):
        fit.update(x, y)
        seen += x.size(0)
        if checkpoints and seen >= checkpoints[0]:
            mean, _ = fit.predictor().predict(test_x, chunk_size=args.chunk_size)
            curve.append((seen, (mean - test_f).square().mean().sqrt().item()))
            checkpoints.pop(0)
    return curve, time.perf_counter() - start


def check_against_in_memory(model: ExactModel, args: argparse.Namespace, test_x) -> tuple[float, float]:
    """Largest |difference| of posterior mean and variance between streaming and the in-memory gprf model."""
    chunks = list(data_chunks(args.check_size, args.dim, args.chunk_size, args.seed))
    x, y = torch.cat([c[0] for c in chunks]), torch.cat([c[1] for c in chunks])
    # Small chunks of 997 points: the sums are taken in another order than the in-memory model's.
    streamed = StreamingFit.from_model(model).fit(iterate_chunks(x, y, chunk_size=997)).predictor().predict(test_x)
    model.set_train_data(x, y, strict=False)
    with torch.no_grad():
        posterior = model(test_x)
    return (streamed[0] - posterior.mean).abs().max().item(), (streamed[1] - posterior.variance).abs().max().item()


def plot(curve: list[tuple[int, float]], args: argparse.Namespace, rss: float, seconds: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.loglog([n for n, _ in curve], [r for _, r in curve], "o-", label="streamed posterior mean")
    ax.set_xlabel("points streamed N")
    ax.set_ylabel("test RMSE to the noise-free f")
    ax.set_title(f"d={args.dim}, F={args.features}: peak RSS {rss:.0f} MB, {seconds:.0f} s (1 thread)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-data", type=int, default=2_000_000, help="points N streamed (default: 2000000)")
    parser.add_argument("--dim", type=int, default=8, help="input dimension d (default: 8)")
    parser.add_argument("--features", type=int, default=256, help="random Fourier features F (default: 256)")
    parser.add_argument(
        "--chunk-size", type=int, default=20_000, help="points generated and streamed at once (default: 20000)"
    )
    parser.add_argument(
        "--checkpoints",
        type=int,
        nargs="*",
        default=[10**5, 3 * 10**5, 10**6, 2 * 10**6],
        help="points seen at which the test RMSE is recorded, besides after the first chunk "
        "(default: 100000 300000 1000000 2000000)",
    )
    parser.add_argument(
        "--train-size", type=int, default=2000, help="subsample for the hyperparameters (default: 2000)"
    )
    parser.add_argument("--steps", type=int, default=60, help="Adam steps on the marginal likelihood (default: 60)")
    parser.add_argument("--check-size", type=int, default=20_000, help="N of the in-memory comparison (default: 20000)")
    parser.add_argument("--test-size", type=int, default=5000, help="test points of the RMSE (default: 5000)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1)")
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the streamed data and the feature draw; seed + 1 and + 2 give the subsample and test set "
        "(default: 0)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: N = 1e5, F = 128, 20 steps, --check-size 5000, one checkpoint at 30000",
    )
    add_output_arguments(parser, "streaming_fit")
    args = parser.parse_args()
    output = output_folder(parser, args, "streaming_fit") if args.plot else None
    if args.quick:
        args.num_data, args.features, args.steps, args.check_size, args.checkpoints = 100_000, 128, 20, 5000, [30_000]
    torch.set_num_threads(args.threads)

    test_x = torch.rand(
        args.test_size, args.dim, generator=torch.Generator().manual_seed(args.seed + 2), dtype=torch.float64
    )
    test_f = target(test_x)
    model = train_hyperparameters(args)
    rss_before = peak_rss_mb()
    curve, seconds = stream(model, args, test_x, test_f)
    rss = peak_rss_mb()
    raw_gb = args.num_data * (args.dim + 1) * 8 / 1e9
    print(
        f"streamed N={args.num_data:,} points (d={args.dim}, F={args.features}, chunks of {args.chunk_size:,}) "
        f"in {seconds:.1f} s on {args.threads} thread(s)"
    )
    print(
        f"peak RSS {rss:.0f} MB (before streaming {rss_before:.0f} MB); the raw data alone would take {raw_gb:.2f} GB "
        f"and its {args.features} features {args.num_data * args.features * 8 / 1e9:.1f} GB"
    )
    for n, rmse in curve:
        print(f"  N = {n:>9,}: test RMSE {rmse:.4f}")
    mean_gap, var_gap = check_against_in_memory(model, args, test_x)
    print(
        f"in-memory gprf model vs streaming at N={args.check_size:,}: max |d mean| = {mean_gap:.2e}, "
        f"max |d variance| = {var_gap:.2e}"
    )
    if args.plot:
        write_outputs(output, "streaming_fit", draw=lambda path: plot(curve, args, rss, seconds, path))


if __name__ == "__main__":
    main()
