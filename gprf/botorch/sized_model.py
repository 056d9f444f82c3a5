r"""One line for a BoTorch loop at any size: the exact ``SingleTaskGP`` while it is the cheaper model, random features
beyond.

A random-feature GP with :math:`F` features costs :math:`O(NF^2 + F^3)` per marginal-likelihood step, the exact GP
:math:`O(N^3)`: below :math:`N \approx 1.88\,F` (:func:`gprf.botorch.exact_is_cheaper`) the exact GP is the cheaper one,
and at those sizes it is also the better one for Bayesian optimisation. Measured (``python -m
benchmarks.acquisition_proposals --problem levy20``): at 30 points in 20 dimensions the posterior mean of a
random-feature model at the exact GP's own hyperparameters differs from the exact one by about :math:`5.5/\sqrt F` of
the targets' standard deviation far from the data (0.22 at the sizing rule's :math:`F = 640`, 0.086 at 4,096), where the
exact mean is the prior's; qLogNEI's optimiser finds the largest of those ripples in a 20-dimensional cube, and its
proposals are worse than the exact GP's at every :math:`F` tried (up to 16,384). :func:`gprf.botorch.single_task_gp`
therefore returns BoTorch's exact ``SingleTaskGP`` (its default covariance, prior and fit) while
:func:`gprf.botorch.exact_is_cheaper` says so at :func:`gprf.suggest_num_features` features, and
:class:`~gprf.botorch.RandomFeatureSingleTaskGP` sized by that rule from there on. A loop that builds its model with it
at every iteration changes model class once, when the data outgrow the exact GP.
"""

from __future__ import annotations

from typing import Any

from botorch.models import SingleTaskGP
from gpytorch.kernels import MaternKernel
from torch import Tensor

from gprf.botorch.models import (
    RandomFeatureSingleTaskGP,
    botorch_lengthscale_arguments,
    check_training_shapes,
    model_batch_shape,
    transformed_dim,
)
from gprf.sizing import suggest_num_features

#: ``kernel`` names of :func:`single_task_gp` and the smoothness of their Matérn kernel (``None``: RBF).
KERNEL_NU = {"rbf": None, "matern12": 0.5, "matern32": 1.5, "matern52": 2.5}


def exact_is_cheaper(num_points: int, num_features: int) -> bool:
    r"""Whether the exact GP's Cholesky factorisation, :math:`N^3/3` multiply-adds, costs no more than the
    random-feature GP's features route, :math:`NF^2 + F^3/3` (:func:`gprf.linalg.route_costs`): up to
    :math:`N \approx 1.88\,F` (the root of :math:`a^3 = 3a + 1`)."""
    for value, name in ((num_points, "num_points"), (num_features, "num_features")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return num_points**3 / 3 <= num_points * num_features**2 + num_features**3 / 3


def single_task_gp(
    train_X: Tensor,
    train_Y: Tensor,
    train_Yvar: Tensor | None = None,
    *,
    kernel: str = "rbf",
    seed: int | None = None,
    **kwargs: Any,
) -> SingleTaskGP:
    r"""BoTorch's exact ``SingleTaskGP`` while it is the cheaper model, a
    :class:`~gprf.botorch.RandomFeatureSingleTaskGP` beyond (module docstring).

    With :math:`F` = :func:`gprf.suggest_num_features` of the training points and the (transformed) input dimension:
    the exact model when :func:`exact_is_cheaper` (up to 721 points in 6 dimensions, 2,405 in 20), with BoTorch's
    default covariance for ``kernel="rbf"`` and a Matérn kernel with the same dimension-scaled lengthscale prior
    otherwise; else the random-feature model with that :math:`F`, the same target kernel and ``seed``. Either is
    fitted with ``fit_gpytorch_mll`` and used as any BoTorch model.

    Args:
        train_X, train_Y, train_Yvar: As ``SingleTaskGP``'s.
        kernel: ``"rbf"``, ``"matern12"``, ``"matern32"`` or ``"matern52"``.
        seed: Seed of the random-feature model's feature draw (unused by the exact model).
        **kwargs: ``likelihood``, ``mean_module``, ``outcome_transform``, ``input_transform``: passed to either model.

    Example:
        >>> model = gprf.botorch.single_task_gp(train_X, train_Y)  # instead of SingleTaskGP(train_X, train_Y)
        >>> fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    """
    if kernel not in KERNEL_NU:
        raise ValueError(f"kernel must be one of {', '.join(map(repr, KERNEL_NU))}, got {kernel!r}.")
    for name in ("covar_module", "num_features", "sampler"):
        if name in kwargs:
            raise TypeError(
                f"single_task_gp chooses the covariance and its size itself and takes no {name!r}; build "
                "RandomFeatureSingleTaskGP or SingleTaskGP directly to set it."
            )
    if train_X.dim() < 2 or train_X.size(-2) == 0:
        raise ValueError(
            f"train_X must have shape (..., n, d) with at least one point, got {tuple(train_X.shape)}; a model needs "
            "training data."
        )
    # Both models get the same check: BoTorch builds an exact model with mismatched rows and fails only later.
    check_training_shapes(train_X, train_Y, train_Yvar)
    num_points = train_X.size(-2)
    num_dims = transformed_dim(train_X, kwargs.get("input_transform"))
    num_features = suggest_num_features(num_points, num_dims)
    if not exact_is_cheaper(num_points, num_features):
        return RandomFeatureSingleTaskGP(
            train_X, train_Y, train_Yvar, num_features=num_features, kernel=kernel, seed=seed, **kwargs
        )
    nu = KERNEL_NU[kernel]
    if nu is None:
        return SingleTaskGP(train_X, train_Y, train_Yvar, **kwargs)
    arguments = botorch_lengthscale_arguments(num_dims, model_batch_shape(train_X, train_Y))
    covar_module = MaternKernel(nu=nu, **arguments).to(train_X)
    return SingleTaskGP(train_X, train_Y, train_Yvar, covar_module=covar_module, **kwargs)
