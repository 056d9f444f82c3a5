"""Compositional random features on digits (8x8 images): approximation error, de-duplication, cost, GP.

Following Daniely, Frostig, Gupta & Singer (2017, §6) on scikit-learn's bundled digits (pixels / 16):

1. Relative Frobenius error ||K_hat - K||_F / ||K||_F of :class:`gprf.features.CompositionalFeatures` versus
   the number of features F, for a shallow skeleton (one fully connected exponential node on the whole image,
   i.e. a Gaussian kernel of the normalised augmented image) and a deep one (one input node per pixel, two
   3x3 ReLU convolution layers, a fully connected ReLU output node), with and without de-duplication; also the
   mean number of repeated monomials without de-duplication, the number of draws T behind the F de-duplicated
   columns, and the relative error of the average of the de-duplicated repeats (about error / sqrt(repeats)
   when the estimate is unbiased; a bias would not average away).
2. Cost per feature versus the input dimension d for ReLU and exponential skeletons (one linear input node
   over all d coordinates): generation (drawing the paths) and evaluation time per feature, atoms per feature;
   random Fourier features of the same F for comparison (their evaluation costs O(d) per feature).
3. GP regression of a one-vs-rest label (+1 / -1 for the digit 3) with the deep compositional kernel: exact
   kernel versus random features, error rate of the sign of the posterior mean.

Usage::

    python examples/compositional_features.py            # about 1 min on 1 CPU thread
    python examples/compositional_features.py --quick    # smoke run
    python examples/compositional_features.py --out docs/_static --plot

Reference: A. Daniely, R. Frostig, V. Gupta, Y. Singer. *Random Features for Compositional Kernels.*
arXiv:1703.07872, 2017.
"""

from __future__ import annotations

import argparse
import time

import gpytorch
import torch
from _output import add_output_arguments, output_folder, write_outputs
from gpytorch.kernels import ScaleKernel
from sklearn import datasets

from gprf.features import CompositionalFeatures, RandomFourierFeatures, Skeleton
from gprf.kernels import CompositionalKernel, CompositionalRandomFeatureKernel
from gprf.metrics import relative_frobenius_error


def skeletons() -> dict[str, Skeleton]:
    return {
        "shallow": Skeleton.fully_connected(64, 1, "exponential"),
        "deep": Skeleton.convolutional((8, 8), patch_size=3, num_layers=2, activation="relu"),
    }


def load_digits() -> tuple[torch.Tensor, torch.Tensor]:
    data = datasets.load_digits()
    return torch.as_tensor(data.data, dtype=torch.float64) / 16.0, torch.as_tensor(data.target)


def approximation(x, grid, repeats, seed=0):
    """(skeleton, dedup, F) -> mean error, std, repeated monomials, draws T, error of the averaged repeats."""
    results = {}
    for name, skeleton in skeletons().items():
        exact = skeleton.kernel(x, x)
        for dedup in (False, True):
            for f in grid:
                errors, repeated, draws, approx_sum = [], [], [], torch.zeros_like(exact)
                for rep in range(repeats):
                    features = CompositionalFeatures(skeleton, f, deduplicate=dedup, seed=seed + 1000 * rep + f)
                    phi = features(x)
                    approx = phi @ phi.mT
                    approx_sum += approx
                    errors.append(float(relative_frobenius_error(approx, exact)))
                    repeated.append(int(features.num_repeated))
                    draws.append(int(features.num_draws))
                bias = float(relative_frobenius_error(approx_sum / repeats, exact))
                t = torch.tensor(errors)
                results[(name, dedup, f)] = (
                    t.mean().item(),
                    t.std().item(),
                    sum(repeated) / repeats,
                    sum(draws) / repeats,
                    bias,
                )
    return results


def cost_table(dims, num_features, num_points):
    rows = []
    generator = torch.Generator().manual_seed(0)
    for d in dims:
        x = torch.rand(num_points, d, generator=generator, dtype=torch.float64)
        for activation in ("relu", "exponential"):
            start = time.perf_counter()
            features = CompositionalFeatures(
                Skeleton.fully_connected(d, 1, activation), num_features, deduplicate=False, seed=1
            )
            generate = time.perf_counter() - start
            start = time.perf_counter()
            for _ in range(5):
                features(x)
            evaluate = (time.perf_counter() - start) / 5
            atoms = float((features.atom_kind != 2).sum()) / num_features
            rows.append((d, activation, 1e6 * generate / num_features, 1e6 * evaluate / num_features, atoms))
        rff = RandomFourierFeatures(d, num_features, seed=1)
        start = time.perf_counter()
        for _ in range(5):
            rff(x)
        rows.append((d, "RFF (rbf)", float("nan"), 1e6 * (time.perf_counter() - start) / 5 / num_features, float(d)))
    return rows


class _RegressionModel(gpytorch.models.ExactGP):
    """ConstantMean + ScaleKernel(base) + GaussianLikelihood."""

    def __init__(self, train_x, train_y, base):
        super().__init__(train_x, train_y, gpytorch.likelihoods.GaussianLikelihood())
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = ScaleKernel(base)

    def forward(self, z):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(z), self.covar_module(z))


def gp_comparison(x, labels, num_train, num_features, steps):
    y = torch.where(labels == 3, 1.0, -1.0).double()
    generator = torch.Generator().manual_seed(1)
    order = torch.randperm(x.size(0), generator=generator)
    train, test = order[:num_train], order[num_train : num_train + 500]
    skeleton = skeletons()["deep"]
    results = {}
    for name, base in (
        ("exact", CompositionalKernel(skeleton)),
        ("random features", CompositionalRandomFeatureKernel(skeleton, num_features, seed=0)),
    ):
        model = _RegressionModel(x[train], y[train], base).double()
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
        optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
        start = time.perf_counter()
        model.train()
        for _ in range(steps):
            optimizer.zero_grad()
            loss = -mll(model(x[train]), y[train])
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            mean = model.likelihood(model(x[test])).mean
        error = float((torch.sign(mean) != y[test]).double().mean())
        results[name] = (error, loss.item(), time.perf_counter() - start)
    return results


def plot(results, grid, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, name in zip(axes, ("shallow", "deep"), strict=True):
        for dedup, label in ((False, "plain"), (True, "de-duplicated")):
            mean = [results[(name, dedup, f)][0] for f in grid]
            std = [results[(name, dedup, f)][1] for f in grid]
            ax.errorbar(grid, mean, yerr=std, marker="o", ms=3, capsize=2, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"digits, {name} skeleton")
        ax.set_xlabel("number of features F")
    axes[0].set_ylabel("rel. Frobenius error")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller grid, fewer repeats")
    parser.add_argument(
        "--points",
        type=int,
        default=300,
        help="digits (random subset) of the kernel-approximation table (default: 300)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1)")
    add_output_arguments(parser, "compositional_features")
    args = parser.parse_args()
    output = output_folder(parser, args, "compositional_features") if args.plot else None
    torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float64)  # feature maps draw their buffers in the default dtype
    grid, repeats = ((64, 256), 2) if args.quick else ((64, 128, 256, 512, 1024, 2048), 5)
    x_all, labels = load_digits()
    index = torch.randperm(x_all.size(0), generator=torch.Generator().manual_seed(0))[: args.points]
    start = time.perf_counter()

    results = approximation(x_all[index], grid, repeats)
    print(f"**Kernel approximation** ({args.points} digits, {repeats} repeats; rel. Frobenius error mean ± std)\n")
    print(
        "| skeleton | F | plain | de-duplicated | repeated monomials (plain) | draws T (dedup) "
        "| error of the mean of the repeats (dedup) |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in ("shallow", "deep"):
        for f in grid:
            plain, dedup = results[(name, False, f)], results[(name, True, f)]
            print(
                f"| {name} | {f} | {plain[0]:.4f} ± {plain[1]:.4f} | {dedup[0]:.4f} ± {dedup[1]:.4f} | "
                f"{plain[2]:.0f} | {dedup[3]:.0f} | {dedup[4]:.4f} |"
            )

    dims = (16, 64) if args.quick else (16, 64, 256, 1024)
    print("\n**Cost per feature** (F = 2048, 256 points; microseconds per feature)\n")
    print("| d | map | generation | evaluation | atoms per feature |")
    print("|---|---|---|---|---|")
    for d, name, generate, evaluate, atoms in cost_table(dims, 2048, 256):
        print(f"| {d} | {name} | {generate:.2f} | {evaluate:.3f} | {atoms:.2f} |")

    num_train, steps = (200, 10) if args.quick else (600, 40)
    gp = gp_comparison(x_all, labels, num_train, 1024, steps)
    print(
        f"\n**GP regression of 'digit 3 vs rest'** ({num_train} training points, 500 test points, {steps} Adam steps)\n"
    )
    print("| kernel | error rate | final loss | time (s) |")
    print("|---|---|---|---|")
    for name, (error, loss, seconds) in gp.items():
        print(f"| {name} | {error:.3f} | {loss:.3f} | {seconds:.1f} |")
    print(f"\ntotal {time.perf_counter() - start:.1f} s")
    if args.plot:
        write_outputs(output, "compositional_features", draw=lambda path: plot(results, grid, path))


if __name__ == "__main__":
    main()
