r"""``--what composite``: accuracy of random features for composite kernels against the exact composite.

For each case and each number of features :math:`F` the benchmark reports, averaged over feature draws, the relative
Frobenius error :math:`\lVert\hat K - K\rVert_F/\lVert K\rVert_F` of the training Gram matrix and the mean per test
point of :math:`\mathrm{KL}(\text{approx}\,\Vert\,\text{exact})` between the noisy predictive marginals (as
``gprf compare`` reports), both GPs conditioned on the same targets (a draw of the exact GP plus noise) with the same
hyperparameters; then the least-squares slope of :math:`\log(\text{error})` against :math:`\log F` (a Monte-Carlo
error falls like :math:`F^{-1/2}`: Frobenius slope :math:`-1/2`; the KL, quadratic in small errors, tends to slope
:math:`-1`, and is shallower while the approximate posterior is still far from the exact one). The design is a seeded
uniform sample of the unit cube.

Cases (:data:`COMPOSITE_CASES`; add one with :func:`register_case`):

* ``product``: RBF on dims 0:3 times Matérn-5/2 on dims 3:6 (lengthscale 0.6), each product method of
  :class:`~gprf.kernels.FeatureProductKernel` at :math:`F` columns (``joint``, ``permutation``) and the naive exact
  Kronecker product of two :math:`\sqrt F`-feature factors (``kronecker-sqrt``, :math:`\approx F` columns);
* ``icm``: intrinsic coregionalisation, RBF data kernel on 3 dims times a rank-2 ``IndexKernel`` of 3 tasks: the
  data kernel with :math:`F` random Fourier features times the exact task root (:math:`F(r + T)` columns).
* ``additive20``: first-order additive RBF over 20 dims (GPyTorch's ``AdditiveStructureKernel``, lengthscale 0.6)
  through ``gprf.random_features``: :math:`F/20` random Fourier features per dimension (even, at least 2),
  concatenated (:class:`~gprf.kernels.AdditiveFeatureKernel`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
from gpytorch.kernels import AdditiveStructureKernel, IndexKernel, Kernel, RBFKernel
from torch import Tensor

from gprf.cli.report import Progress, format_table
from gprf.conversion import random_features
from gprf.kernels import FeatureProductKernel, RandomFourierKernel
from gprf.metrics import gaussian_kl, relative_frobenius_error

# A case builder: (num_features, method, seed) -> (approximate kernel, exact kernel); the inputs come from
# CASE_INPUTS[name](n, generator).
CaseBuilder = Callable[[int, str, int], tuple[Kernel, Kernel]]
COMPOSITE_CASES: dict[str, tuple[tuple[str, ...], CaseBuilder, Callable[[int, torch.Generator], Tensor]]] = {}
# Name of the additive case the conversion work registers (see register_case): d = 20 additive structure.
ADDITIVE_CASE_HOOK = "additive20"
NOISE = 0.01
LENGTHSCALE = 0.6


def register_case(
    name: str, methods: tuple[str, ...], inputs: Callable[[int, torch.Generator], Tensor]
) -> Callable[[CaseBuilder], CaseBuilder]:
    """Decorator adding a case: ``methods`` are passed to the builder one by one, ``inputs(n, generator)`` draws the
    design."""

    def decorate(builder: CaseBuilder) -> CaseBuilder:
        COMPOSITE_CASES[name] = (methods, builder, inputs)
        return builder

    return decorate


def _cube(dims: int) -> Callable[[int, torch.Generator], Tensor]:
    return lambda n, generator: torch.rand(n, dims, generator=generator, dtype=torch.float64)


def _fourier(num_features: int, dims: list[int], kernel: str, seed: int) -> RandomFourierKernel:
    result = RandomFourierKernel(num_features, num_dims=len(dims), kernel=kernel, active_dims=dims, seed=seed).double()
    result.lengthscale = LENGTHSCALE
    return result


@register_case("product", ("joint", "permutation", "kronecker-sqrt"), _cube(6))
def product_case(num_features: int, method: str, seed: int) -> tuple[Kernel, Kernel]:
    """RBF on dims 0:3 times Matérn-5/2 on dims 3:6 with ``num_features`` product columns."""
    if method == "kronecker-sqrt":  # the naive choice: exact Kronecker of two sqrt(F)-feature factors
        per_factor = max(2, 2 * round(math.sqrt(num_features) / 2))
        rbf, matern = (
            _fourier(per_factor, [0, 1, 2], "rbf", seed),
            _fourier(per_factor, [3, 4, 5], "matern52", seed + 1),
        )
        approx = FeatureProductKernel(rbf, matern, method="kronecker")
    else:
        rbf = _fourier(num_features, [0, 1, 2], "rbf", seed)
        matern = _fourier(num_features, [3, 4, 5], "matern52", seed + 1)
        approx = FeatureProductKernel(rbf, matern, num_features=num_features, method=method, seed=seed + 2)
    return approx, approx.exact()


def _tasks_and_points(n: int, generator: torch.Generator) -> Tensor:
    x = torch.rand(n, 3, generator=generator, dtype=torch.float64)
    return torch.cat([x, torch.arange(n).remainder(3).double().unsqueeze(-1)], -1)


@register_case("icm", ("kronecker",), _tasks_and_points)
def icm_case(num_features: int, method: str, seed: int) -> tuple[Kernel, Kernel]:
    """RBF data kernel on 3 dims times a rank-2 IndexKernel of 3 tasks (exact task root)."""
    task = IndexKernel(num_tasks=3, rank=2, active_dims=[3]).double()
    with torch.no_grad():
        task.covar_factor.copy_(torch.tensor([[1.0, 0.2], [0.8, -0.4], [0.3, 0.9]], dtype=torch.float64))
        task.var = torch.tensor([0.05, 0.1, 0.2], dtype=torch.float64)
    approx = _fourier(num_features, [0, 1, 2], "rbf", seed) * task
    return approx, approx.exact()


@register_case(ADDITIVE_CASE_HOOK, ("per-dimension",), _cube(20))
def additive_case(num_features: int, method: str, seed: int) -> tuple[Kernel, Kernel]:
    """First-order additive RBF over 20 dims (GPyTorch's ``AdditiveStructureKernel``, lengthscale 0.6) through
    ``gprf.random_features``: ``F // 20`` (even) features per dimension."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # GPyTorch deprecates the class, not its kernel
        structure = AdditiveStructureKernel(RBFKernel(), num_dims=20).double()
    structure.base_kernel.lengthscale = LENGTHSCALE
    # Two features (a cosine and a sine) per dimension at least: below 40 the root has 40 columns (reported).
    approx = random_features(structure, max(num_features, 40), seed=seed)
    return approx, approx.exact()


def _predictive(covariance: Tensor, cross: Tensor, test_diag: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """Noisy predictive mean and variance of a zero-mean GP (dense, float64; the exact reference needs it anyway)."""
    factor = torch.linalg.cholesky(covariance + NOISE * torch.eye(covariance.size(-1), dtype=covariance.dtype))
    weights = torch.cholesky_solve(cross.mT, factor)
    mean = (weights.mT @ targets.unsqueeze(-1)).squeeze(-1)
    variance = test_diag - (cross * weights.mT).sum(-1) + NOISE
    return mean, variance


def _slope(features: list[int], values: list[float]) -> float | None:
    """Least-squares slope of log(value) against log(F) (``None`` with fewer than two positive values)."""
    points = [(math.log(f), math.log(v)) for f, v in zip(features, values, strict=True) if v > 0]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)


@torch.no_grad()
def run_composite(
    features: list[int], n: int, test_points: int, draws: int, seed: int, log: Progress, cases: list[str] | None = None
) -> dict:
    """Errors per case, method and ``F`` (means over ``draws`` feature draws) and their fitted slopes."""
    results: dict = {}
    for name in cases or list(COMPOSITE_CASES):
        methods, builder, inputs = COMPOSITE_CASES[name]
        generator = torch.Generator().manual_seed(seed)
        points = inputs(n + test_points, generator)
        train, test = points[:n], points[n:]
        _, exact = builder(features[0], methods[0], seed)
        covariance = exact(train).to_dense()
        factor = torch.linalg.cholesky(covariance + NOISE * torch.eye(n, dtype=torch.float64))
        targets = factor @ torch.randn(n, generator=generator, dtype=torch.float64)  # a draw of the exact GP
        exact_mean, exact_var = _predictive(covariance, exact(test, train).to_dense(), exact(test, diag=True), targets)
        case: dict = {}
        for method in methods:
            rows = {"features": [], "root_columns": [], "frobenius": [], "kl": []}
            for num_features in features:
                frobenius, kl = [], []
                for draw in range(draws):
                    approx, _ = builder(num_features, method, seed + 1000 * draw + 1)
                    root = approx.features(train)
                    approx_covariance = root @ root.mT
                    frobenius.append(float(relative_frobenius_error(approx_covariance, covariance)))
                    test_root = approx.features(test)
                    mean, var = _predictive(approx_covariance, test_root @ root.mT, test_root.square().sum(-1), targets)
                    kl.append(float(gaussian_kl(mean, var, exact_mean, exact_var)))
                rows["features"].append(num_features)
                rows["root_columns"].append(approx.root_dim)
                rows["frobenius"].append(sum(frobenius) / draws)
                rows["kl"].append(sum(kl) / draws)
                log(f"composite {name} {method} F={num_features}: rel.Frob {rows['frobenius'][-1]:.4g}, "
                    f"KL {rows['kl'][-1]:.4g}")  # fmt: skip
            rows["slope_frobenius"] = _slope(rows["features"], rows["frobenius"])
            rows["slope_kl"] = _slope(rows["features"], rows["kl"])
            case[method] = rows
        results[name] = case
    return {"n": n, "test_points": test_points, "draws": draws, "noise": NOISE, "cases": results}


def render_composite(report: dict) -> list[str]:
    """The table: one row per case, method and F; then the fitted slopes."""

    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.3g}"

    rows = [
        [name, method, str(f), str(cols), fmt(frob), fmt(kl)]
        for name, case in report["cases"].items()
        for method, per in case.items()
        for f, cols, frob, kl in zip(per["features"], per["root_columns"], per["frobenius"], per["kl"], strict=True)
    ]
    lines = [
        f"composite kernels: N = {report['n']}, {report['test_points']} test points, noise {report['noise']}, "
        f"means over {report['draws']} feature draws",
        "",
        format_table(["case", "method", "F", "columns", "rel.Frob", "KL/point"], rows),
    ]
    lines += ["", "slope of log(error) against log(F) (Monte-Carlo rate: rel.Frob -0.5; KL -1 when small):"]
    for name, case in report["cases"].items():
        for method, rows in case.items():
            lines.append(f"  {name} {method}: rel.Frob {fmt(rows['slope_frobenius'])}, KL {fmt(rows['slope_kl'])}")
    return lines
