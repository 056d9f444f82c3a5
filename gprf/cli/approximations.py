"""Registry of the kernel approximations that ``gprf compare`` evaluates.

Adding a method is one :func:`register` call with a factory that builds a
:class:`~gprf.kernels.RandomFeatureKernel` from an :class:`ApproximationRequest`::

    register(Approximation(
        name="my-orf",
        summary="orthogonal random features, my variant",
        factory=lambda req: RandomFourierKernel(req.num_features, req.num_dims, sampler="orthogonal",
                                                seed=req.seed, ard_num_dims=req.num_dims),
    ))

``compare`` wraps the kernel in ``ScaleKernel`` and copies the exact GP's fitted hyperparameters into
it (mean constant, outputscale, lengthscale, noise) *after* the factory returns, so factories only need
the shape, seed and, for data-dependent methods, the training inputs and lengthscale. A factory whose
features depend on the lengthscale (the optimized Maclaurin allocation) sets ``request.lengthscale``
itself before fitting them (see the Maclaurin factories at the end of this module).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpytorch.kernels import Kernel
from torch import Tensor

from gprf.cli.kernel_spec import is_composite_spec
from gprf.cli.models import EXACT_KERNELS
from gprf.conversion import random_features
from gprf.kernels import MaclaurinKernel, RandomFourierKernel


@dataclass(frozen=True)
class ApproximationRequest:
    """What a factory gets: the model shape, the feature seed and the (standardised) training data."""

    num_features: int
    num_dims: int
    kernel: str  # one of EXACT_KERNELS, or a composite spec
    seed: int
    train_x: Tensor  # (N, d), on the run's device and dtype
    lengthscale: Tensor | None  # the exact GP's fitted lengthscale, shape (1, d) or (1, 1); None for composites
    expression: Kernel | None = None  # a composite spec's fitted exact expression (a copy the factory may keep)


@dataclass(frozen=True)
class Approximation:
    """A named approximation of the exact kernels in :data:`~gprf.cli.models.EXACT_KERNELS`.

    Attributes:
        name: The ``--methods`` name.
        summary: One line for ``--help`` and the report.
        factory: Builds the (unscaled) random-feature kernel; must return a kernel on ``train_x``'s
            device and dtype or one that ``.to()`` moves there, with a ``lengthscale`` if the exact
            kernel has one.
        kernels: The ``--kernel`` values it approximates.
        check_num_features: Returns an error message if it cannot use ``F`` features, else ``None``.
    """

    name: str
    summary: str
    factory: Callable[[ApproximationRequest], Kernel]
    kernels: tuple[str, ...] = EXACT_KERNELS
    check_num_features: Callable[[int], str | None] = lambda num_features: None

    def build(self, request: ApproximationRequest) -> Kernel:
        return self.factory(request).to(device=request.train_x.device, dtype=request.train_x.dtype)


#: All registered approximations, in registration (= report) order.
APPROXIMATIONS: dict[str, Approximation] = {}


def register(approximation: Approximation) -> Approximation:
    """Add ``approximation`` to :data:`APPROXIMATIONS` (names must be unique)."""
    if approximation.name in APPROXIMATIONS:
        raise ValueError(f"An approximation named {approximation.name!r} is already registered.")
    if not approximation.name or "," in approximation.name:
        raise ValueError(f"Invalid approximation name {approximation.name!r}.")
    APPROXIMATIONS[approximation.name] = approximation
    return approximation


#: The ``kernels`` entry of approximations that handle composite ``--kernel`` specs (:mod:`gprf.cli.kernel_spec`).
COMPOSITE = "composite"


def kernel_family(kernel: str) -> str:
    """``kernel`` itself for the single kernels, :data:`COMPOSITE` for composite specs."""
    return COMPOSITE if is_composite_spec(kernel) else kernel


def methods_for_kernel(kernel: str) -> list[str]:
    """Names of the registered approximations of ``kernel`` (a single kernel's name or a composite spec)."""
    return [name for name, approx in APPROXIMATIONS.items() if kernel_family(kernel) in approx.kernels]


# ---------------------------------------------------------------------------------------- random Fourier
def _even_features(num_features: int) -> str | None:
    if num_features % 2:
        return (
            f"random Fourier features need an even F (F/2 cosine + F/2 sine features), got {num_features}; "
            f"use {num_features + 1}"
        )
    return None


def _fourier(sampler: str) -> Callable[[ApproximationRequest], Kernel]:
    def factory(request: ApproximationRequest) -> Kernel:
        if request.expression is not None:  # a composite spec: every part by the same sampler, tied to the copy
            return random_features(request.expression, request.num_features, sampler=sampler, seed=request.seed)
        return RandomFourierKernel(
            request.num_features,
            request.num_dims,
            kernel=request.kernel,
            sampler=sampler,
            seed=request.seed,
            ard_num_dims=request.num_dims,
        )

    return factory


for _name, _sampler, _summary in (
    ("rff", "iid", "random Fourier features, iid frequencies (Rahimi & Recht 2007)"),
    ("orf", "orthogonal", "orthogonal random features (Yu et al. 2016)"),
    ("sorf", "structured", "structured orthogonal random features, O(d log d) (Yu et al. 2016)"),
    ("qmc", "qmc", "quasi-Monte-Carlo Fourier features, scrambled Sobol (Yang et al. 2014)"),
):
    register(
        Approximation(
            _name, _summary, _fourier(_sampler), kernels=(*EXACT_KERNELS, COMPOSITE), check_num_features=_even_features
        )
    )


# ---------------------------------------------------------------------------------------- Maclaurin
#: The optimizer needs the constant feature plus one feature per degree up to ``min_degree``.
MACLAURIN_MIN_DEGREE = 2


def _maclaurin_features(num_features: int) -> str | None:
    if num_features < MACLAURIN_MIN_DEGREE + 1:
        return (
            f"optimized Maclaurin features need F >= {MACLAURIN_MIN_DEGREE + 1} (the constant feature plus one "
            f"feature per degree up to min_degree={MACLAURIN_MIN_DEGREE}), got {num_features}"
        )
    return None


def _maclaurin(sketch: str, is_complex: bool) -> Callable[[ApproximationRequest], Kernel]:
    def factory(request: ApproximationRequest) -> Kernel:
        kernel = MaclaurinKernel(
            request.num_features,
            request.num_dims,
            kernel="gaussian",
            sketch=sketch,
            complex=is_complex,
            min_degree=MACLAURIN_MIN_DEGREE,
            seed=request.seed,
            ard_num_dims=request.num_dims,
        ).to(device=request.train_x.device, dtype=request.train_x.dtype)
        # The allocation (and the centre) depend on the lengthscale: optimize them at the exact GP's
        # lengthscale, on train_x / lengthscale, before compare copies the (same) hyperparameters in.
        kernel.lengthscale = request.lengthscale.to(request.train_x).expand_as(kernel.lengthscale)
        kernel.refit_allocation(request.train_x)  # the centre uses every row, the statistics <= 1000
        return kernel

    return factory


for _name, _sketch, _complex, _summary in (
    (
        "maclaurin-rad",
        "rademacher",
        False,
        "optimized Maclaurin features, Rademacher sketches (Wacker et al. 2024, Alg. 2-3)",
    ),
    (
        "maclaurin-srht",
        "srht",
        False,
        "optimized Maclaurin features, TensorSRHT sketches (Wacker et al. 2024, Alg. 2-3)",
    ),
    (
        "maclaurin-srht-complex",
        "srht",
        True,
        "optimized Maclaurin features, complex TensorSRHT; F complex features = 2F real columns (Wacker et al. 2024)",
    ),
):
    register(
        Approximation(
            _name, _summary, _maclaurin(_sketch, _complex), kernels=("rbf",), check_num_features=_maclaurin_features
        )
    )
