r"""Conjugate-gradient iterations of an exact GP's training solve, by preconditioner: none, GPyTorch's pivoted Cholesky
and :class:`gprf.kernels.PreconditionedKernel`'s (random features, Nyström points).

Protocol: a seeded subsample of ``--rows`` rows of each data set, a 90/10 split standardised with the training
statistics (as ``gprf bench --what regression``); an exact GP (constant mean, ``ScaleKernel(RBFKernel)`` with ARD)
tuned by Adam on a seeded ``--tune-rows``-row subsample of the training rows, started at lengthscale 1, outputscale 1
and noise 0.1 (Cholesky, float64); then the solve :math:`\hat K^{-1}(y - \mu)` on all training rows at those
hyperparameters is run with linear_operator's ``linear_cg`` (float64) under each preconditioner. The number reported
for a tolerance is the first iteration whose relative residual :math:`\lVert r_k\rVert/\lVert y-\mu\rVert` is below it
(:func:`gprf.linalg.cg_iterations`). GPyTorch solves predictions to ``eval_cg_tolerance`` (0.01); its training
tolerance (1) is met by the first iteration. The kernel matrix is formed once to make the products fast: iterations
do not depend on how products are computed.

Run (CPU, one thread; the data sets are ``<name>.npz`` files with arrays ``x`` and ``y``)::

    python -m benchmarks.cg_iterations --data-dir ../shared/data/uci --datasets kin40k,protein

``--state-dir DIR`` keeps the tuned hyperparameters between runs; ``--features 1024,4096`` and ``--kinds
iid,orthogonal,nystrom`` choose the preconditioners besides none and the pivoted Cholesky. ``--spectrum`` also
prints what the kernel matrix's eigenvalues :math:`\lambda_i` say about any rank-:math:`F` preconditioner: the
statistical dimension :math:`s_\sigma = \sum_i \lambda_i/(\lambda_i + \sigma^2)` (Avron, Clarkson & Woodruff 2017
bound the random features a spectral approximation of :math:`K + \sigma^2 I` needs by multiples of it for
leverage-weighted features, and of :math:`N\lambda_1/\sigma^2`-like quantities for plain ones), the number of
eigenvalues above :math:`\sigma^2`, and the condition number :math:`(\lambda_{F+1} + \sigma^2)/\sigma^2` that remains
after the best rank-:math:`F` preconditioner (the top :math:`F` eigenvectors), for each ``--features`` value.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import gpytorch
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from linear_operator import to_linear_operator
from torch import Tensor

from benchmarks.regression_data import load_npz, regression_split
from gprf.kernels import PreconditionedKernel
from gprf.linalg import FeatureRoot, FeatureRootPreconditioner, cg_iterations

TOLERANCES = (1e-1, 1e-2, 1e-3, 1e-4)


class ExactGP(gpytorch.models.ExactGP):
    def __init__(self, x: Tensor, y: Tensor, covar_module: gpytorch.kernels.Kernel) -> None:
        super().__init__(x, y, gpytorch.likelihoods.GaussianLikelihood())
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = covar_module

    def forward(self, x: Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def tune_on_subsample(x: Tensor, y: Tensor, rows: int, steps: int, seed: int, state: Path | None = None) -> ExactGP:
    """An exact GP tuned by ``steps`` Adam steps (learning rate 0.1) on a seeded subsample of ``rows`` rows (its
    ``state_dict`` read from ``state`` when that file exists, and written there otherwise)."""
    subset = torch.randperm(x.size(0), generator=torch.Generator().manual_seed(seed))[:rows]
    model = ExactGP(x[subset], y[subset], ScaleKernel(RBFKernel(ard_num_dims=x.size(-1)))).to(x.dtype)
    if state is not None and state.is_file():
        model.load_state_dict(torch.load(state))
        return model
    model.covar_module.base_kernel.lengthscale = 1.0
    model.covar_module.outputscale = 1.0
    model.likelihood.noise = 0.1
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(model.likelihood, model)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model.train()
    with gpytorch.settings.max_cholesky_size(rows):
        for _ in range(steps):
            optimizer.zero_grad()
            (-mll(model(*model.train_inputs), model.train_targets)).backward()
            optimizer.step()
    if state is not None:
        torch.save(model.state_dict(), state)
    return model


def pivoted_cholesky_preconditioner(kernel_matrix, noise: Tensor, rank: int) -> Callable[[Tensor], Tensor]:
    r""":math:`v \mapsto P^{-1}v` for GPyTorch's preconditioner of the training covariance ``kernel_matrix`` plus
    ``noise`` (one variance): :math:`P = LL^\top + \sigma^2 I` with :math:`L` the rank-``rank`` pivoted Cholesky
    factor of the kernel matrix, applied by the Woodbury identity."""
    pivoted = to_linear_operator(kernel_matrix).pivoted_cholesky(rank=rank)
    return FeatureRootPreconditioner.from_root(FeatureRoot(pivoted, noise=noise.detach().reshape(1))).solve


def preconditioners(
    model: ExactGP, x: Tensor, features: Sequence[int], kinds: Sequence[str], pivoted_rank: int, seed: int
) -> dict[str, Callable[[Tensor], Tensor] | None]:
    """``{name: v -> P^{-1} v}`` for the training covariance of ``model`` at inputs ``x``: none, GPyTorch's pivoted
    Cholesky of rank ``pivoted_rank``, and :class:`PreconditionedKernel`'s for every kind (``"nystrom"`` or a
    random-feature sampler such as ``"iid"``) and number of features."""
    noise = model.likelihood.noise.detach().reshape(1)
    with torch.no_grad():
        result = {
            "none": None,
            f"pivoted Cholesky, rank {pivoted_rank}": pivoted_cholesky_preconditioner(
                model.covar_module(x).to_dense(), noise, pivoted_rank
            ),
        }
        for kind in kinds:
            options = {"preconditioner": "nystrom"} if kind == "nystrom" else {"sampler": kind}
            for num_features in features:
                kernel = PreconditionedKernel(model.covar_module, num_features, seed=seed, **options)
                preconditioner = kernel(x).evaluate_kernel().add_diagonal(noise).preconditioner
                label = (
                    f"Nystrom, {num_features} points" if kind == "nystrom" else f"{kind} features, F = {num_features}"
                )
                result[label] = preconditioner.solve
    return result


def print_spectrum(kernel_matrix: Tensor, noise: float, features: Sequence[int]) -> None:
    r"""The statistical dimension :math:`\sum_i \lambda_i/(\lambda_i + \sigma^2)` of ``kernel_matrix`` at noise
    :math:`\sigma^2`, its eigenvalues above :math:`\sigma^2`, and per ``features`` value :math:`F` the condition number
    :math:`(\lambda_{F+1} + \sigma^2)/\sigma^2` of the best rank-:math:`F` preconditioner (its top eigenpairs plus the
    noise), whose CG iterations grow like its square root."""
    eigenvalues = torch.linalg.eigvalsh(kernel_matrix).flip(0).clamp_min(0.0)
    dimension = (eigenvalues / (eigenvalues + noise)).sum().item()
    above = int((eigenvalues > noise).sum())
    conditions = ", ".join(
        f"F = {f}: {(eigenvalues[f].item() + noise) / noise:.3g}" for f in features if f < eigenvalues.numel()
    )
    print(
        f"  statistical dimension {dimension:.0f}; {above} eigenvalues above the noise; "
        f"condition number left by the best rank-F preconditioner: {conditions}",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--datasets", default="kin40k,protein")
    parser.add_argument("--rows", type=int, default=12000)
    parser.add_argument("--tune-rows", type=int, default=2000)
    parser.add_argument("--tune-steps", type=int, default=100)
    parser.add_argument("--features", default="1024", help="comma-separated F of the random-feature preconditioner")
    parser.add_argument(
        "--kinds", default="iid,orthogonal,nystrom", help="random-feature samplers, and/or nystrom (Nystrom points)"
    )
    parser.add_argument("--pivoted-rank", type=int, default=15, help="GPyTorch's max_preconditioner_size")
    parser.add_argument("--max-iter", type=int, default=1000, help="GPyTorch's max_cg_iterations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--state-dir", type=Path, help="keep the tuned hyperparameters here (<name>_state.pt)")
    parser.add_argument(
        "--spectrum",
        action="store_true",
        help="also print the statistical dimension and the condition number left by the best rank-F preconditioner",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    features = [int(f) for f in args.features.split(",")]
    kinds = args.kinds.split(",")
    for name in args.datasets.split(","):
        _, split = regression_split(load_npz(args.data_dir / f"{name}.npz"), args.rows, args.seed, "cpu", torch.float64)
        x, y = split.train_x, split.train_y
        start = time.perf_counter()
        state = None if args.state_dir is None else args.state_dir / f"{name}_state.pt"
        model = tune_on_subsample(x, y, args.tune_rows, args.tune_steps, args.seed, state)
        kernel = model.covar_module
        print(
            f"{name}: {x.size(0)} training rows; tuned on {args.tune_rows} in {time.perf_counter() - start:.0f} s: "
            f"lengthscales {[round(v, 3) for v in kernel.base_kernel.lengthscale.flatten().tolist()]}, "
            f"outputscale {kernel.outputscale.item():.3f}, noise {model.likelihood.noise.item():.4f}"
        )
        with torch.no_grad():
            kernel_matrix = kernel(x).to_dense()
            if args.spectrum:
                print_spectrum(kernel_matrix, model.likelihood.noise.item(), features)
            covariance = kernel_matrix + model.likelihood.noise * torch.eye(x.size(0), dtype=x.dtype)
            del kernel_matrix
            rhs = (y - model.mean_module.constant).unsqueeze(-1)
        for label, solve in preconditioners(model, x, features, kinds, args.pivoted_rank, args.seed).items():
            start = time.perf_counter()
            counts = cg_iterations(covariance.matmul, rhs, solve, TOLERANCES, args.max_iter)
            row = ", ".join(
                f"tol {tol:g}: {count if count is not None else f'>{args.max_iter}'}" for tol, count in counts.items()
            )
            print(f"  {label:42s} {row}   ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
