r""":func:`random_features`: one call to approximate a GPyTorch kernel expression by gprf feature kernels."""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel

from gprf._checks import check_positive_int

# Importing the translation modules registers them.
from gprf.conversion import composites, leaves  # noqa: F401
from gprf.conversion.budget import Budget, BudgetOverride
from gprf.conversion.registry import Context, translate
from gprf.features import FOURIER_SAMPLERS, SKETCHES
from gprf.kernels.preconditioned_kernel import register_random_features


def random_features(
    kernel: Kernel,
    num_features: int,
    *,
    budget: BudgetOverride = None,
    sampler: str = "iid",
    sketch: str = "srht",
    seed: int | None = None,
    num_dims: int | None = None,
) -> Kernel:
    r"""The gprf feature kernel that approximates the GPyTorch kernel expression ``kernel``, sharing its
    hyperparameters.

    Every hyperparameter of the result *is* the original's (the same ``Parameter`` objects, constraints and priors),
    so training either kernel trains both, and :func:`gprf.kernels.exact_expression` of the result (or ``exact()``
    of a feature kernel) gives the exact expression back. The translation, part by part:

    ==================================  =========================================================================
    GPyTorch                            gprf
    ==================================  =========================================================================
    ``RBFKernel``, ``MaternKernel``     :class:`~gprf.kernels.RandomFourierKernel` (``"rbf"``, ``"matern12"``, ...;
    (every stationary target of         Rahimi & Recht 2007), ``sampler`` as given
    :mod:`gprf.kernels.exact.targets`)
    ``ScaleKernel``                     ``ScaleKernel`` sharing ``raw_outputscale``
    ``AdditiveKernel`` (``k1 + k2``)    :class:`~gprf.kernels.FeatureSumKernel` (concatenated roots)
    ``ProductKernel`` (``k1 * k2``)     :class:`~gprf.kernels.FeatureProductKernel`
    ``AdditiveStructureKernel``         :class:`~gprf.kernels.AdditiveFeatureKernel` (per-dimension features,
                                        iid frequencies whatever ``sampler``)
    ``LinearKernel``                    :class:`~gprf.kernels.LinearFeatureKernel` (exact root)
    ``PolynomialKernel``                :class:`~gprf.kernels.OffsetPolynomialSketchKernel` (``sketch`` as given)
    ``IndexKernel``, BoTorch's          :class:`~gprf.kernels.IndexRootKernel` (exact low-rank root)
    ``PositiveIndexKernel``
    gprf feature kernels                kept as they are
    ==================================  =========================================================================

    An expression of gprf kernels is accepted in either spelling and comes back in gprf's canonical one, sharing its
    parts: GPyTorch's ``ScaleKernel(k1) * k2`` as ``FeatureProductKernel(ScaleKernel(k1), k2, num_features=F)``,
    ``ScaleKernel(k1) + ScaleKernel(k2)`` as a ``FeatureSumKernel`` — what GPyTorch predicts with gprf's feature-space
    strategy (it picks its own for its ``AdditiveKernel`` and ``ProductKernel``, whose covariances keep the roots too).

    ``active_dims``, ``ard_num_dims`` and ``batch_shape`` are carried over. Other kernels raise a ``TypeError``
    naming the part (its dotted path, e.g. ``"kernels.1.base_kernel: PeriodicKernel ..."``) and the nearest supported
    alternative; translations for more kernel types can be added with
    :func:`gprf.conversion.register_translation`, and a stationary kernel added to the exact-target table is
    translated like RBF and Matérn (:doc:`/extending`).

    ``num_features`` is split across the parts by the budget rule of :mod:`gprf.conversion.budget`: sums share it
    evenly among their random parts after paying exact parts (linear, task) their exact width, products give it to
    every factor and form as many product features, additive structure gives each dimension an equal share.

    Args:
        kernel: A GPyTorch kernel expression.
        num_features: The features :math:`F` of the whole expression.
        budget: Per-part overrides: a dict ``{path: F}`` (paths as in ``kernel.named_modules()``, e.g.
            ``{"kernels.0": 1024}``), or a callable ``budget(path, kernel, proposed) -> int``.
        sampler: Random Fourier feature sampler (``"iid"``, the default, ``"orthogonal"``, ``"structured"``,
            ``"qmc"``). Defaults differ between entry points (the docs' "Which model?" page lists them).
        sketch: Polynomial sketch (``"gaussian"``, ``"rademacher"``, ``"srht"``, the default here, or
            ``"tensorsketch"``); :class:`~gprf.kernels.PolynomialSketchKernel` defaults to ``"gaussian"``.
        seed: Seed of the draws; each random part draws with ``seed + i`` (its index in the expression), so parts
            are independent. ``None``: seeded from torch's global generator state, which it does not advance.
        num_dims: Input dimension for parts that do not tell it (no ``active_dims``, no ``ard_num_dims``).

    Example:
        >>> exact = ScaleKernel(RBFKernel(ard_num_dims=3, active_dims=[0, 1, 2])) + LinearKernel(active_dims=[3])
        >>> covar_module = gprf.random_features(exact, num_features=1024, seed=0)  # FeatureSumKernel: 1023 + 1
    """
    check_positive_int(num_features, "num_features")
    if sampler not in FOURIER_SAMPLERS:
        raise ValueError(f"Unknown sampler {sampler!r}; valid choices are: {', '.join(map(repr, FOURIER_SAMPLERS))}.")
    if sketch not in SKETCHES:
        raise ValueError(f"Unknown sketch {sketch!r}; valid choices are: {', '.join(map(repr, SKETCHES))}.")
    if num_dims is not None:
        check_positive_int(num_dims, "num_dims")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"seed must be an int or None (each random part draws with seed + its index), got {seed!r}.")
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a GPyTorch Kernel, got {type(kernel).__name__}.")
    budget_rule = Budget(budget)
    context = Context("", num_features, budget_rule, sampler, sketch, seed, num_dims)
    result = translate(kernel, context)
    budget_rule.check_all_used(context._paths)
    reference = next(iter(kernel.parameters()), None)
    return result.to(reference) if isinstance(reference, torch.Tensor) else result


# PreconditionedKernel builds its preconditioner's root with this function (gprf.kernels cannot import it back).
register_random_features(random_features)
