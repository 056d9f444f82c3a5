"""BoTorch models with gprf kernels shared by the tests of gprf.botorch, and the dense references their posteriors and
acquisition optimizations are checked against."""

from __future__ import annotations

import gpytorch
import pytest
import torch

pytest.importorskip("botorch")

from botorch.acquisition import AcquisitionFunction
from botorch.models import SingleTaskGP
from botorch.models.transforms import Normalize, Standardize
from botorch.optim import optimize_acqf
from botorch.optim.initializers import gen_batch_initial_conditions

import gprf
import gprf.botorch  # registers the pathwise integration
from gprf.botorch import RandomFeatureSingleTaskGP
from gprf.kernels import FeatureProductKernel, RandomFourierKernel


def branin_like(x: torch.Tensor, num_outputs: int) -> torch.Tensor:
    """Smooth test targets on [0, 1]^d (one or two outputs, different scales)."""
    first = torch.sin(6 * x).sum(-1) + x.square().sum(-1)
    second = 10 * torch.cos(4 * x[..., :1]).squeeze(-1) + x.sum(-1)
    return torch.stack([first, second], -1)[..., :num_outputs]


def make_botorch_model(
    num_outputs: int = 1,
    n: int = 40,
    d: int = 3,
    num_features: int = 64,
    device: str | torch.device = "cpu",
    seed: int = 0,
    data_seed: int = 0,
    **kwargs,
) -> RandomFeatureSingleTaskGP:
    """A RandomFeatureSingleTaskGP with Normalize/Standardize on reproducible data (float64).

    ``seed`` seeds the features, ``data_seed`` the data.
    """
    generator = torch.Generator().manual_seed(data_seed)
    x = (2 * torch.rand(n, d, generator=generator, dtype=torch.float64) - 1).to(device)
    y = branin_like(x, num_outputs)
    return RandomFeatureSingleTaskGP(
        x,
        y,
        num_features=num_features,
        seed=seed,
        input_transform=Normalize(d, bounds=torch.tensor([[-1.0] * d, [1.0] * d], dtype=torch.float64, device=device)),
        outcome_transform=Standardize(num_outputs),
        **kwargs,
    )


COMPOSITE_DIMS = 6
COMPOSITES = ("product-joint", "product-permutation", "product-kronecker", "linear", "polynomial", "additive")


def composite_kernel(name: str, num_features: int = 64, seed: int = 0) -> gpytorch.kernels.Kernel:
    """The ``covar_module`` of composite case ``name`` on ``COMPOSITE_DIMS`` (6) inputs, float64.

    * ``product-*``: ``ScaleKernel`` of an RBF on inputs 0:3 times a Matérn-5/2 on inputs 3:6 (disjoint), as a
      :class:`~gprf.kernels.FeatureProductKernel` by joint frequencies, random pairing, or the exact Kronecker product
      of two 8-feature factors (64 columns);
    * ``linear``, ``polynomial``, ``additive``: ``gprf.random_features`` of ``ScaleKernel(RBF) + LinearKernel()``,
      ``ScaleKernel(RBF) + PolynomialKernel(power=2)`` and ``ScaleKernel(AdditiveStructureKernel(RBF))`` over all six
      inputs.
    """
    d = COMPOSITE_DIMS
    if name.startswith("product-"):
        method = name.removeprefix("product-")
        factor_features = 8 if method == "kronecker" else num_features
        rbf = RandomFourierKernel(factor_features, num_dims=3, ard_num_dims=3, active_dims=[0, 1, 2], seed=seed)
        matern = RandomFourierKernel(
            factor_features, num_dims=3, kernel="matern52", ard_num_dims=3, active_dims=[3, 4, 5], seed=seed + 1
        )
        product = FeatureProductKernel(
            rbf, matern, num_features=None if method == "kronecker" else num_features, method=method, seed=seed + 2
        )
        return gpytorch.kernels.ScaleKernel(product).double()
    rbf = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=d))
    expressions = {
        "linear": lambda: rbf + gpytorch.kernels.LinearKernel(),
        "polynomial": lambda: rbf + gpytorch.kernels.PolynomialKernel(power=2),
        "additive": lambda: gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.AdditiveStructureKernel(gpytorch.kernels.RBFKernel(), num_dims=d)
        ),
    }
    return gprf.random_features(expressions[name](), num_features, seed=seed, num_dims=d).double()


def make_composite_model(name: str, plain: bool = False, n: int = 30, seed: int = 0, **kwargs) -> SingleTaskGP:
    """A ``RandomFeatureSingleTaskGP`` (or, ``plain``, BoTorch's ``SingleTaskGP``) with ``composite_kernel(name)``,
    Normalize/Standardize, on reproducible data in [-1, 1]^6; the same ``name`` and ``seed`` give the same model."""
    d = COMPOSITE_DIMS
    x = 2 * torch.rand(n, d, generator=torch.Generator().manual_seed(0), dtype=torch.float64) - 1
    y = branin_like(x, 1)
    model_class = SingleTaskGP if plain else RandomFeatureSingleTaskGP
    return model_class(
        x,
        y,
        covar_module=composite_kernel(name, seed=seed),
        input_transform=Normalize(d, bounds=torch.tensor([[-1.0] * d, [1.0] * d], dtype=torch.float64)),
        outcome_transform=Standardize(1),
        **kwargs,
    )


def dense_posterior(model, test_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Mean and variance (``M x m``) of ``model.posterior(test_x)`` from the dense function-space GP formulas.

    :math:`\mu_* + K_{*X}(K_{XX} + \Sigma)^{-1}(y - \mu_X)` and :math:`k_{**} - K_{*X}(K_{XX} + \Sigma)^{-1}K_{X*}`
    with the kernel matrices evaluated densely (``N x N`` solves) in the model's transformed space — inputs through its
    input transform, targets and noise as the model stores them (standardized) — then untransformed by the outcome
    transform, as BoTorch's posterior is. The model predicts through the feature-space (Woodbury) route, so equality
    checks that route against the definition.
    """
    with torch.no_grad():
        (train_x,) = model.train_inputs
        targets = model.train_targets
        x = model.transform_inputs(test_x)
        kernel = model.covar_module
        system = kernel(train_x).to_dense() + torch.diag_embed(model.likelihood.noise.expand(targets.shape))
        cross = kernel(x, train_x).to_dense()
        residual = (targets - model.mean_module(train_x)).unsqueeze(-1)
        mean = model.mean_module(x) + (cross @ torch.linalg.solve(system, residual)).squeeze(-1)
        variance = kernel(x, diag=True) - (cross * torch.linalg.solve(system, cross.mT).mT).sum(-1)
        # (m, M) -> (M, m), or (M,) -> (M, 1) for one output.
        mean, variance = (t.mT if model.num_outputs > 1 else t.unsqueeze(-1) for t in (mean, variance))
        return model.outcome_transform.untransform(mean, variance)


def optimize_from_fixed_starts(
    acquisition: AcquisitionFunction, bounds: torch.Tensor, q: int, num_restarts: int = 2, raw_samples: int = 32
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``optimize_acqf`` from initial conditions drawn with a fixed seed: ``(candidates, value, starts)``.

    The starts are BoTorch's own choice among ``raw_samples`` scrambled Sobol points (seed 0), passed explicitly so
    that the optimized value can be compared with the value at each start: L-BFGS-B never ends worse than it began.
    """
    starts = gen_batch_initial_conditions(acquisition, bounds, q, num_restarts, raw_samples, options={"seed": 0})
    candidates, value = optimize_acqf(
        acquisition, bounds, q=q, num_restarts=num_restarts, batch_initial_conditions=starts, options={"maxiter": 10}
    )
    return candidates, value, starts


def assert_gradient_matches_finite_differences(acquisition: AcquisitionFunction, x: torch.Tensor) -> None:
    """The autograd gradient of ``acquisition`` at ``x`` (``b x q x d``, float64) against fourth-order central
    differences, :math:`[-f(x+2h) + 8f(x+h) - 8f(x-h) + f(x-2h)] / 12h`, at the best of the steps
    :math:`h = 10^{-3}, 10^{-4}, 10^{-5}`.

    With fixed base samples the acquisition is a smooth deterministic function, but no one step suits every point: its
    float64 value carries rounding of order 1e-12 (solves amplified by the condition number of the posterior's
    factors), which enters the quotient as 1e-12 / h, while far in the tail of qLogNEI (values near -50) its higher
    derivatives are large and the truncation error (fifth derivative times h^4 / 30) needs h near 1e-5 (measured on
    the two-output model of the model tests). Truncation falls and rounding grows as h shrinks, so the best step is
    within both of the true derivative; a gradient wrong by more than the tolerance is off at every step.
    """
    x = x.detach().clone().requires_grad_(True)
    (gradient,) = torch.autograd.grad(acquisition(x).sum(), x)
    errors = torch.full_like(x, float("inf"))
    with torch.no_grad():
        for step in (1e-3, 1e-4, 1e-5):
            for index in range(x[0].numel()):
                offset = torch.zeros_like(x)
                offset.view(x.size(0), -1)[:, index] = step
                differences = 8 * (acquisition(x + offset) - acquisition(x - offset))
                differences -= acquisition(x + 2 * offset) - acquisition(x - 2 * offset)
                error = (differences / (12 * step) - gradient.view(x.size(0), -1)[:, index]).abs()
                flat = errors.view(x.size(0), -1)
                flat[:, index] = torch.minimum(flat[:, index], error)
    tolerance = 1e-7 + 1e-5 * gradient.abs()
    assert bool((errors <= tolerance).all()), f"gradient errors {errors} exceed {tolerance}"
