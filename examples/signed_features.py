"""Signed random features for indefinite kernels: Table II of Luo et al. (2021) and kernel ridge regression.

Part 1 (Table II): relative Frobenius error of GRFF (iid) and GORF (orthogonal) on 1000 unit-normalised
scikit-learn digits (d = 64), s in {d/2, d, 2d, 8d} frequencies per part, mean and std over 10 draws, for

* the delta-Gaussian kernel exp(-z^2/2) - exp(-z^2/200) (a = (1, -1), sigma = (1, 10), the paper's setting);
* the polynomial kernel on the sphere (1 - z^2/a^2)^p with a = 2, p = 40, truncated at W = 80. The paper's
  a = 3, p = 1 has a spectral measure of infinite total variation: with the radial Jacobian its masses grow
  without bound with the truncation radius (printed below), so it is not a usable setting in d = 64.

Part 2: kernel ridge regression (the Krein-space posterior mean) on the diabetes data (d = 10, 300 train /
142 test points, standardised inputs for the delta-Gaussian kernel, unit-normalised for the spherical one):
test RMSE of the exact indefinite kernel against GRFF and GORF with s = 8d (ridge sigma^2 = 1 for the
delta-Gaussian, 10 for the spherical kernel: a smaller ridge lets K_hat + sigma^2 I come close to singular), through
``gprf.prediction.krein_ridge_mean``.

Run ``python examples/signed_features.py [--plot] [--out DIR]`` (about a minute on one CPU thread); ``--plot`` writes
``signed_features.png`` into ``--out`` (default ./signed_features_output; the docs' figure: ``--out docs/_static
--plot``); ``--quick`` is a smoke run (200 digits, 2 draws).

Reference: Q. Luo, K. Fang, J. Yang, X. Huang. *Towards Unbiased Random Features with Lower Variance for Stationary
Indefinite Kernels.* International Joint Conference on Neural Networks (IJCNN), 2021.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from _output import add_output_arguments, output_folder, write_outputs
from sklearn.datasets import load_diabetes, load_digits

from gprf.features import SignedRandomFeatures, delta_gaussian_spectrum, spherical_polynomial_spectrum
from gprf.kernels import SignedRandomFeatureKernel
from gprf.metrics import relative_frobenius_error
from gprf.prediction import krein_ridge_mean

DRAWS = 10
QUICK_DRAWS, QUICK_DIGITS = 2, 200
MULTIPLIERS = (0.5, 1, 2, 8)


def unit_rows(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True)


def table_two(x: torch.Tensor, spectrum, draws: int) -> dict[str, list[tuple[float, float]]]:
    exact = spectrum.profile(torch.cdist(x, x))
    rows = {}
    for sampler in ("iid", "orthogonal"):
        rows[sampler] = []
        for multiplier in MULTIPLIERS:
            s = int(multiplier * x.size(-1))
            feature_map = SignedRandomFeatures(x.size(-1), s, spectrum, sampler=sampler, batch_shape=(draws,), seed=s)
            a, b = feature_map(x)
            errors = relative_frobenius_error(a @ a.mT - b @ b.mT, exact)
            rows[sampler].append((float(errors.mean()), float(errors.std())))
    return rows


def print_table(name: str, rows: dict[str, list[tuple[float, float]]], draws: int) -> None:
    print(f"\n{name}: relative Frobenius error, mean +- std over {draws} draws")
    print(f"{'method':8s}" + "".join(f"{f's={m:g}d':>18s}" for m in MULTIPLIERS))
    for sampler, label in (("iid", "GRFF"), ("orthogonal", "GORF")):
        print(f"{label:8s}" + "".join(f"{m:>11.4f} +- {s:.4f}" for m, s in rows[sampler]))


def ridge_rmse(
    name: str, spectrum, x_train, y_train, x_test, y_test, lengthscale: float, noise: float, draws: int
) -> None:
    d = x_train.size(-1)
    offset = y_train.mean()
    results = {}
    for sampler in ("iid", "orthogonal"):
        rmses = []
        for seed in range(draws):
            kernel = SignedRandomFeatureKernel(8 * d, spectrum, num_dims=d, sampler=sampler, seed=seed).double()
            if not spectrum.on_sphere:
                kernel.lengthscale = lengthscale
            exact = kernel.exact()
            with torch.no_grad():
                mean = krein_ridge_mean(kernel, x_train, y_train - offset, x_test, noise) + offset
            rmses.append(float((mean - y_test).square().mean().sqrt()))
        results[sampler] = torch.tensor(rmses)
    with torch.no_grad():
        exact_mean = krein_ridge_mean(exact, x_train, y_train - offset, x_test, noise) + offset
    exact_rmse = float((exact_mean - y_test).square().mean().sqrt())
    print(
        f"{name:28s} exact {exact_rmse:7.2f}   GRFF {results['iid'].mean():7.2f} +- {results['iid'].std():.2f}"
        f"   GORF {results['orthogonal'].mean():7.2f} +- {results['orthogonal'].std():.2f}"
    )


def plot(tables: dict, path: Path) -> None:
    """Relative Frobenius error of the iid and orthogonal samplers against s / d, one panel per spectrum."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, (name, rows) in zip(axes, tables.items(), strict=True):
        for sampler, label in (("iid", "GRFF (iid)"), ("orthogonal", "GORF (orthogonal)")):
            means, stds = zip(*rows[sampler], strict=True)
            ax.errorbar(MULTIPLIERS, means, yerr=stds, marker="o", capsize=3, label=label)
        ax.set(xscale="log", yscale="log", xlabel="s / d", title=f"{name}, digits (d = 64)")
        ax.set_xticks(MULTIPLIERS, [f"{m:g}" for m in MULTIPLIERS])
    axes[0].set_ylabel("relative Frobenius error")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_output_arguments(parser, "signed_features")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_DIGITS} digits and {QUICK_DRAWS} draws (default: 1000 and {DRAWS})",
    )
    args = parser.parse_args()
    output = output_folder(parser, args, "signed_features") if args.plot else None
    draws, digits = (QUICK_DRAWS, QUICK_DIGITS) if args.quick else (DRAWS, 1000)
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)

    x = unit_rows(torch.as_tensor(load_digits().data[:digits]))
    delta = delta_gaussian_spectrum([1.0, -1.0], [1.0, 10.0])
    sphere = spherical_polynomial_spectrum(2.0, 40, 64, truncation=80.0)
    print(
        f"spherical polynomial a=2, p=40, d=64, W=80: masses {sphere.masses[0]:.3f} / {sphere.masses[1]:.3f}, "
        f"max |truncation bias| on [0, 2] {float(sphere.truncation_bias(torch.linspace(0, 2, 41)).abs().max()):.1e}"
    )
    for radius in (10.0, 20.0, 30.0):
        paper = spherical_polynomial_spectrum(3.0, 1, 64, truncation=radius)
        print(f"paper's a=3, p=1, d=64 truncated at W={radius:g}: masses {paper.masses[0]:.3g} / {paper.masses[1]:.3g}")
    tables = {"delta-Gaussian": table_two(x, delta, draws), "polynomial on the sphere": table_two(x, sphere, draws)}
    for name, rows in tables.items():
        print_table(name, rows, draws)

    print(f"\nKernel ridge regression on diabetes (test RMSE, s = 8d, mean +- std over {draws} draws)")
    data = load_diabetes()
    inputs, targets = torch.as_tensor(data.data), torch.as_tensor(data.target)
    order = torch.randperm(inputs.size(0), generator=torch.Generator().manual_seed(0))
    inputs, targets = inputs[order], targets[order]
    standardised = (inputs - inputs[:300].mean(0)) / inputs[:300].std(0)
    ridge_rmse(
        "delta-Gaussian (l = 3)",
        delta,
        standardised[:300],
        targets[:300],
        standardised[300:],
        targets[300:],
        3.0,
        1.0,
        draws,
    )
    sphere10 = spherical_polynomial_spectrum(2.0, 5, 10, truncation=80.0)
    unit = unit_rows(standardised)
    ridge_rmse(
        "sphere a=2, p=5 (W = 80)", sphere10, unit[:300], targets[:300], unit[300:], targets[300:], 1.0, 10.0, draws
    )

    if args.plot:
        write_outputs(output, "signed_features", draw=lambda path: plot(tables, path))


if __name__ == "__main__":
    main()
