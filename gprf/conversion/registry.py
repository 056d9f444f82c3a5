r"""Translations of GPyTorch kernels into gprf feature kernels, registered by kernel type.

Like BoTorch's ``sampling/pathwise`` dispatchers, a translation is registered for a kernel class and found along
the class's method resolution order, so subclasses (BoTorch's ``PositiveIndexKernel`` of ``IndexKernel``) use their
base's translation unless they register their own::

    @register_translation(MyKernel)
    def _(kernel: MyKernel, context: Context) -> Kernel:
        return MyFeatureKernel(context.features(kernel), ...)

A translation receives the kernel and a :class:`Context` (its path in the expression, its features, the options of
the call) and returns a gprf kernel sharing the kernel's hyperparameters.

A translation may also be registered for a kind of exact target, a row class of the exact-target table
(:mod:`gprf.kernels.exact.targets`): a kernel without a translation of its own that the table knows as a target of
that kind uses it. Every stationary target (:class:`~gprf.kernels.exact.StationaryTarget`: GPyTorch's RBF and Matérn
kernels, and any stationary family added to the table) gets random Fourier features this way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from gpytorch.kernels import Kernel

from gprf.conversion.budget import Budget
from gprf.kernels.exact.targets import EXACT_TARGETS

Translation = Callable[[Kernel, "Context"], Kernel]
_TRANSLATIONS: dict[type, Translation] = {}
# Kernels with no translation, and what to use instead (the error names the nearest supported alternative).
ALTERNATIVES: dict[str, str] = {
    "PeriodicKernel": "gprf has no random features for periodic kernels; an RBFKernel or MaternKernel on the "
    "inputs (or on sin/cos-transformed inputs) is the nearest supported choice",
    "RQKernel": "the rational quadratic kernel is a scale mixture of RBF kernels: use a sum of ScaleKernel("
    "RBFKernel()) with a few lengthscales, or MaternKernel",
    "SpectralMixtureKernel": "use a sum (AdditiveKernel) of ScaleKernel(RBFKernel()) components",
    "CosineKernel": "use RBFKernel or MaternKernel",
    "PiecewisePolynomialKernel": "use MaternKernel (nu = 1/2, 3/2 or 5/2)",
    "RFFKernel": "use RBFKernel (gprf draws the random Fourier features itself)",
    "MultitaskKernel": "use a product of the data kernel and an IndexKernel on a task column (BoTorch's MultiTaskGP "
    "layout)",
}
SUPPORTED = (
    "RBFKernel, MaternKernel (nu = 1/2, 3/2, 5/2), ScaleKernel, AdditiveKernel, ProductKernel, "
    "AdditiveStructureKernel, LinearKernel, PolynomialKernel, IndexKernel/PositiveIndexKernel and gprf feature kernels"
)


def register_translation(*kernel_types: type) -> Callable[[Translation], Translation]:
    """Decorator registering a translation for ``kernel_types`` (and their subclasses without their own): GPyTorch
    kernel classes, or kinds of exact target (:class:`~gprf.kernels.exact.ExactTarget` subclasses)."""

    for kernel_type in kernel_types:
        if not isinstance(kernel_type, type):
            raise TypeError(
                f"register_translation takes kernel classes (or exact-target kinds), got {type(kernel_type).__name__} "
                f"{kernel_type!r}; use it as @register_translation(MyKernel)."
            )

    def decorator(translation: Translation) -> Translation:
        for kernel_type in kernel_types:
            _TRANSLATIONS[kernel_type] = translation
        return translation

    return decorator


def find_translation(kernel_type: type) -> Translation | None:
    """The translation registered for ``kernel_type`` or its nearest base class; else the one registered for the kind
    of exact target whose class is nearest (a kernel class of the exact-target table)."""
    own = _nearest(kernel_type.__mro__)
    if own is not None:
        return own
    for cls in kernel_type.__mro__:
        for target in EXACT_TARGETS.values():
            if target.kernel_type is cls:
                translation = _nearest(type(target).__mro__)
                if translation is not None:
                    return translation
    return None


def _nearest(mro: tuple[type, ...]) -> Translation | None:
    return next((_TRANSLATIONS[cls] for cls in mro if cls in _TRANSLATIONS), None)


def describe(path: str) -> str:
    """A part's path as the errors show it."""
    return path if path else "the kernel (root)"


@dataclass
class Context:
    """Where a translation is in the expression and the options of the :func:`gprf.random_features` call."""

    path: str
    num_features: int
    budget: Budget
    sampler: str
    sketch: str
    seed: int | None
    num_dims: int | None
    _seed_counter: list[int] = field(default_factory=lambda: [0])
    _paths: list[str] = field(default_factory=list)

    def child(self, name: str, num_features: int, num_dims: int | None = None) -> Context:
        """The context of the sub-kernel at attribute ``name`` (e.g. ``"base_kernel"``, ``"kernels.0"``); ``num_dims``
        when the parent selects columns (its ``active_dims``)."""
        path = f"{self.path}.{name}" if self.path else name
        return Context(
            path,
            num_features,
            self.budget,
            self.sampler,
            self.sketch,
            self.seed,
            self.num_dims if num_dims is None else num_dims,
            self._seed_counter,
            self._paths,
        )

    def features(self, kernel: Kernel) -> int:
        """This part's features after the user's ``budget`` overrides."""
        return self.budget.resolve(self.path, kernel, self.num_features)

    def next_seed(self) -> int | None:
        """A distinct seed for each random part (independent draws across parts), ``None`` if the call has none."""
        count = self._seed_counter[0]
        self._seed_counter[0] += 1
        return None if self.seed is None else self.seed + count

    def error(self, kernel: Kernel, problem: str, fix: str) -> str:
        """An error message naming the part: ``"<path>: <Type> <problem>; <fix>."``"""
        return f"{describe(self.path)}: {type(kernel).__name__} {problem}; {fix}."


def translate(kernel: Kernel, context: Context) -> Kernel:
    """The gprf kernel for ``kernel`` (a ``TypeError`` naming the part if no translation is registered)."""
    context._paths.append(context.path)
    translation = find_translation(type(kernel))
    if translation is None:
        name = type(kernel).__name__
        alternative = ALTERNATIVES.get(name, f"supported kernels are {SUPPORTED}")
        raise TypeError(f"{describe(context.path)}: {name} has no random-feature translation; {alternative}.")
    return translation(kernel, context)
