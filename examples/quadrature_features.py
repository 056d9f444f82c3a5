"""Kernel approximation error of quadrature-based features SR(3,3) against Monte-Carlo features.

Reproduces the protocol of Munkhoeva, Kapushev, Burnaev & Oseledets (2018, Fig. 1) on scikit-learn's bundled
data: random 550-point subsets, relative Frobenius error ||K_hat - K||_F / ||K||_F versus the number ``n`` of
SR(3,3) rules, every method given the same number of features D = 2 n (d + 1) ("one rule per feature
block"), for

* G: iid Gaussian frequencies (random Fourier features / random arc-cosine features),
* ORF: orthogonal random features (Haar blocks, chi_d row norms),
* QMC: scrambled Sobol points through the inverse normal CDF,
* SR(3,3)-Haar and SR(3,3)-butterfly: :class:`gprf.features.QuadratureFeatures`.

Kernels: RBF with gamma = 1/d (k = exp(-||x - y||^2 / d), i.e. lengthscale sqrt(d / 2)), arc-cosine of
order 0 and 1 (scale-free). Inputs: digits divided by its maximum (16); wine and breast cancer with every
column min-max scaled to [0, 1] (their columns have very different ranges).

Usage::

    python examples/quadrature_features.py            # < 2 min on 1 CPU thread
    python examples/quadrature_features.py --quick    # smoke run
    python examples/quadrature_features.py --out docs/_static --plot

Reference: M. Munkhoeva, Y. Kapushev, E. Burnaev, I. Oseledets. *Quadrature-based Features for Kernel
Approximation.* Advances in Neural Information Processing Systems (NeurIPS), 2018.
"""

from __future__ import annotations

import argparse
import math
import time

import torch
from _output import add_output_arguments, output_folder, write_outputs
from scipy import stats
from sklearn import datasets

from gprf.features import QuadratureFeatures, RandomFourierFeatures
from gprf.features.quadrature import arccos_kernel
from gprf.ops import haar_orthogonal, sobol_normal

KERNELS = ("rbf", "arccos0", "arccos1")
METHODS = ("G", "ORF", "QMC", "SR-Haar", "SR-butterfly")


def load(name: str) -> torch.Tensor:
    if name == "digits":
        x = torch.as_tensor(datasets.load_digits().data, dtype=torch.float64)
        return x / x.max()
    loader = {"wine": datasets.load_wine, "breast_cancer": datasets.load_breast_cancer}[name]
    x = torch.as_tensor(loader().data, dtype=torch.float64)
    span = (x.max(0).values - x.min(0).values).clamp_min(1e-12)
    return (x - x.min(0).values) / span


def exact_kernel(x: torch.Tensor, kernel: str) -> torch.Tensor:
    if kernel == "rbf":
        return torch.exp(-(torch.cdist(x, x) ** 2) / x.size(-1))
    return arccos_kernel(x, x, order=int(kernel[-1]))


def gaussian_rows(method: str, num: int, dim: int, generator: torch.Generator) -> torch.Tensor:
    """``num`` frequency rows with N(0, I) marginals: iid, orthogonal blocks or QMC."""
    if method == "G":
        return torch.randn(num, dim, generator=generator, dtype=torch.float64)
    if method == "QMC":
        return sobol_normal(num, dim, generator=generator)
    blocks = math.ceil(num / dim)
    q = haar_orthogonal((blocks,), dim, generator=generator)
    u = torch.rand(blocks, dim, generator=generator, dtype=torch.float64)
    norms = torch.as_tensor(stats.chi.ppf(u.numpy(), df=dim))
    return (q * norms.unsqueeze(-1)).reshape(blocks * dim, dim)[:num]


def approximate(x: torch.Tensor, kernel: str, method: str, rules: int, seed: int) -> torch.Tensor:
    d = x.size(-1)
    num_features = QuadratureFeatures.features_per_rule(d) * rules
    if method.startswith("SR"):
        rotation = "haar" if method == "SR-Haar" else "butterfly"
        z = x / math.sqrt(d / 2) if kernel == "rbf" else x
        # Butterfly pads d to a power of two; keep the same number of rules (D may be larger).
        phi = QuadratureFeatures(d, rules, kernel=kernel, rotation=rotation, seed=seed)(z)
        return phi @ phi.mT
    generator = torch.Generator().manual_seed(seed)
    if kernel == "rbf":
        sampler = {"G": "iid", "ORF": "orthogonal", "QMC": "qmc"}[method]
        phi = RandomFourierFeatures(d, num_features, sampler=sampler, seed=seed)(x / math.sqrt(d / 2))
        return phi @ phi.mT
    w = gaussian_rows(method, num_features, d, generator)
    proj = x @ w.mT
    g = torch.heaviside(proj, proj.new_tensor(0.5)) if kernel == "arccos0" else torch.relu(proj)
    phi = g * math.sqrt(2.0 / num_features)
    return phi @ phi.mT


def run(names, rules_grid, repeats, num_points, seed=0):
    results = {}  # (dataset, kernel, method, n) -> (mean, std)
    for name in names:
        data = load(name)
        for kernel in KERNELS:
            errors = {(m, n): [] for m in METHODS for n in rules_grid}
            for rep in range(repeats):
                generator = torch.Generator().manual_seed(seed + 1000 * rep)
                index = torch.randperm(data.size(0), generator=generator)[:num_points]
                x = data[index]
                exact = exact_kernel(x, kernel)
                for m_index, method in enumerate(METHODS):
                    for n in rules_grid:
                        approx = approximate(x, kernel, method, n, seed=seed + 1000 * rep + 10 * n + m_index)
                        errors[(method, n)].append(float(torch.linalg.norm(approx - exact) / torch.linalg.norm(exact)))
            for (method, n), values in errors.items():
                t = torch.tensor(values)
                results[(name, kernel, method, n)] = (t.mean().item(), t.std().item() if len(values) > 1 else 0.0)
    return results


def markdown(results, names, rules_grid) -> str:
    lines = []
    for name in names:
        for kernel in KERNELS:
            lines.append(f"\n**{name}, {kernel}** (mean relative Frobenius error)\n")
            lines.append("| n rules | " + " | ".join(METHODS) + " |")
            lines.append("|---" * (len(METHODS) + 1) + "|")
            for n in rules_grid:
                cells = [f"{results[(name, kernel, m, n)][0]:.4f}" for m in METHODS]
                lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results, names, rules_grid, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(KERNELS), len(names), figsize=(4 * len(names), 3.2 * len(KERNELS)), squeeze=False)
    for col, name in enumerate(names):
        for row, kernel in enumerate(KERNELS):
            ax = axes[row][col]
            for method in METHODS:
                mean = [results[(name, kernel, method, n)][0] for n in rules_grid]
                std = [results[(name, kernel, method, n)][1] for n in rules_grid]
                ax.errorbar(rules_grid, mean, yerr=std, marker="o", ms=3, capsize=2, label=method)
            ax.set_yscale("log")
            ax.set_title(f"{name}, {kernel}")
            ax.set_xlabel("n (rules); D = 2n(d+1)")
            if col == 0:
                ax.set_ylabel("rel. Frobenius error")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="digits only, 2 repeats, n in {1, 2}")
    parser.add_argument(
        "--repeats", type=int, default=20, help="random point subsets and feature draws per setting (default: 20)"
    )
    parser.add_argument("--points", type=int, default=550, help="random rows of each dataset per repeat (default: 550)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1)")
    add_output_arguments(parser, "quadrature_features")
    args = parser.parse_args()
    output = output_folder(parser, args, "quadrature_features") if args.plot else None
    torch.set_num_threads(args.threads)
    torch.set_default_dtype(torch.float64)  # feature maps draw their buffers in the default dtype
    if args.quick:
        names, rules_grid, repeats = ("digits",), (1, 2), 2
    else:
        names, rules_grid, repeats = ("digits", "wine", "breast_cancer"), (1, 2, 3, 4, 5), args.repeats
    start = time.perf_counter()
    results = run(names, rules_grid, repeats, args.points)
    print(markdown(results, names, rules_grid))
    print(f"\n{repeats} repeats of {args.points} random points; {time.perf_counter() - start:.1f} s")
    if args.plot:
        write_outputs(output, "quadrature_features", draw=lambda path: plot(results, names, rules_grid, path))


if __name__ == "__main__":
    main()
