r"""Accuracy of fast predictive variances (``gpytorch.settings.fast_pred_var``): GPyTorch's LOVE (Lanczos) against
:class:`gprf.kernels.PreconditionedKernel`'s Rayleigh–Ritz cache on its preconditioner's subspace, both against the
exact variances (Cholesky).

Protocol as ``benchmarks/cg_iterations.py`` (its tuned hyperparameters are reused through ``--state-dir``); the GP is
conditioned on the first ``--rows`` training rows, so that the exact variances can be computed by Cholesky, and
predicts the first ``--test-rows`` test rows. Run (CPU, one thread)::

    python -m benchmarks.fast_variances --data-dir ../shared/data/uci --datasets kin40k --state-dir STATE
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import gpytorch
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel

from benchmarks.cg_iterations import ExactGP, tune_on_subsample
from benchmarks.regression_data import load_npz, regression_split
from gprf.kernels import PreconditionedKernel


def conditioned(kernel: gpytorch.kernels.Kernel, x: torch.Tensor, y: torch.Tensor, tuned: ExactGP) -> ExactGP:
    """An exact GP with ``kernel`` on ``(x, y)``, with the likelihood and mean of ``tuned``, in eval mode."""
    gp = ExactGP(x, y, kernel).double()
    gp.likelihood.load_state_dict(tuned.likelihood.state_dict())
    gp.mean_module.load_state_dict(tuned.mean_module.state_dict())
    return gp.eval()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--datasets", default="kin40k,protein")
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--test-rows", type=int, default=200)
    parser.add_argument("--features", default="256,1024")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--state-dir", type=Path, help="tuned hyperparameters of benchmarks/cg_iterations.py")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    for name in args.datasets.split(","):
        _, split = regression_split(load_npz(args.data_dir / f"{name}.npz"), 12000, args.seed, "cpu", torch.float64)
        state = None if args.state_dir is None else args.state_dir / f"{name}_state.pt"
        tuned = tune_on_subsample(split.train_x, split.train_y, 2000, 100, args.seed, state)
        x, y = split.train_x[: args.rows], split.train_y[: args.rows]
        test_x = split.test_x[: args.test_rows]
        base = ScaleKernel(RBFKernel(ard_num_dims=x.size(-1))).double()
        base.load_state_dict(tuned.covar_module.state_dict())

        with torch.no_grad(), gpytorch.settings.max_cholesky_size(x.size(0)):
            exact = conditioned(base, x, y, tuned)(test_x).variance
        print(f"{name}: {x.size(0)} rows, exact variances {exact.min().item():.4f}-{exact.max().item():.4f}")
        candidates = {"GPyTorch LOVE (Lanczos)": conditioned(base, x, y, tuned)}
        for kind in ("random_features", "nystrom"):
            for num_features in (int(f) for f in args.features.split(",")):
                kernel = PreconditionedKernel(base, num_features, preconditioner=kind, seed=args.seed)
                candidates[f"Ritz on {kind}, F = {num_features}"] = conditioned(kernel, x, y, tuned)
        for label, gp in candidates.items():
            start = time.perf_counter()
            with (
                torch.random.fork_rng(),
                torch.no_grad(),
                gpytorch.settings.fast_pred_var(),
                gpytorch.settings.max_cholesky_size(100),
            ):
                torch.manual_seed(args.seed)
                variance = gp(test_x).variance
            relative = ((variance - exact).abs() / exact).median().item()
            print(
                f"  {label:34s} max |error| {(variance - exact).abs().max().item():.4f}, median relative error "
                f"{relative:.3f}, min(fast - exact) {(variance - exact).min().item():+.1e} "
                f"({time.perf_counter() - start:.1f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
