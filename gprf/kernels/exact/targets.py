r"""The table of exact targets: every exact kernel gprf approximates, once, by name.

A row names a target (what feature maps call it, e.g. ``RandomFourierFeatures(kernel="matern52")``), its kernel class
and the constructor arguments that single it out among that class's kernels (``nu=2.5``). Every reader goes through
this table:

* a feature kernel's ``exact()`` builds its target from the row (:meth:`~gprf.kernels.exact.ExactTarget.build`), with
  its own hyperparameters tied in;
* :func:`gprf.random_features` finds the row of a GPyTorch kernel (:func:`~gprf.kernels.exact.find_exact_target`): every
  stationary target (:class:`~gprf.kernels.exact.StationaryTarget`, a row with a spectral law) gets random Fourier
  features;
* the ``gprf compare`` command offers the stationary targets as ``--kernel`` and builds them from their rows.

A new stationary family adds its :class:`~gprf.features.StationarySpectrum` (its profile and radial sampler), its
exact kernel and one row, ``register_exact_target(StationaryTarget(spectrum, ExactKernelClass))``; see
:doc:`/extending`.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import MappingProxyType

from gpytorch.kernels import Kernel, LinearKernel, MaternKernel, PolynomialKernel, RBFKernel

from gprf.features.spectral import SPECTRA, MaternSpectrum, StationarySpectrum
from gprf.kernels.exact.additive import ExactAdditiveKernel
from gprf.kernels.exact.arc_cosine import ArcCosineKernel
from gprf.kernels.exact.compositional import CompositionalKernel
from gprf.kernels.exact.delta_gaussian import DeltaGaussianKernel
from gprf.kernels.exact.dot_product import ExponentialDotProductKernel, ScaledPolynomialKernel
from gprf.kernels.exact.spherical_polynomial import SphericalPolynomialKernel


class ExactTarget:
    """One exact kernel: its ``name``, its ``kernel_type`` and the ``fixed`` constructor arguments that single it out
    among the kernels of that class (``aliases`` are other names of the same target).

    Args:
        name: The target's name (unique in the table, aliases included).
        kernel_type: Its GPyTorch kernel class.
        aliases: Other names feature maps use for it (the Maclaurin maps call the RBF kernel ``"gaussian"``).
        fixed: Constructor arguments of every kernel of this target (e.g. ``nu=2.5``); the per-instance ones
            (a degree, a skeleton) are passed to :meth:`build`.
    """

    def __init__(self, name: str, kernel_type: type[Kernel], *, aliases: tuple[str, ...] = (), **fixed) -> None:
        if not (isinstance(kernel_type, type) and issubclass(kernel_type, Kernel)):
            raise TypeError(f"kernel_type must be a GPyTorch Kernel class, got {kernel_type!r}.")
        self.name, self.kernel_type, self.aliases = name, kernel_type, tuple(aliases)
        self.fixed = MappingProxyType(dict(fixed))

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def build(self, **arguments) -> Kernel:
        """A new kernel of this target: ``kernel_type(**fixed, **arguments)``."""
        return self.kernel_type(**self.fixed, **arguments)

    def matches(self, kernel: Kernel) -> bool:
        """Whether ``kernel`` is a kernel of this target (its class, or a subclass, with the fixed arguments)."""
        return isinstance(kernel, self.kernel_type) and all(
            getattr(kernel, name, None) == value for name, value in self.fixed.items()
        )

    def __repr__(self) -> str:
        fixed = "".join(f", {name}={value!r}" for name, value in self.fixed.items())
        return f"{type(self).__name__}({self.name!r}, {self.kernel_type.__name__}{fixed})"


class StationaryTarget(ExactTarget):
    r"""A stationary target with a spectral law (Bochner): random Fourier features draw from ``spectrum``, which names
    the row.

    Args:
        spectrum: The unit-lengthscale kernel's :class:`~gprf.features.StationarySpectrum`.
        kernel_type: The exact kernel class (with a lengthscale: :math:`k(x, y) = k_0(\lVert x - y\rVert/\ell)`).
        aliases, fixed: As for :class:`ExactTarget`.
    """

    def __init__(
        self, spectrum: StationarySpectrum, kernel_type: type[Kernel], *, aliases: tuple[str, ...] = (), **fixed
    ) -> None:
        if not isinstance(spectrum, StationarySpectrum):
            raise TypeError(f"spectrum must be a gprf.features.StationarySpectrum, got {type(spectrum).__name__}.")
        super().__init__(spectrum.name, kernel_type, aliases=aliases, **fixed)
        self.spectrum = spectrum


#: The rows by name (aliases are looked up by :func:`exact_target`).
EXACT_TARGETS: dict[str, ExactTarget] = {}


def register_exact_target(target: ExactTarget) -> ExactTarget:
    """Add ``target`` to the table; its name and aliases must be new."""
    if not isinstance(target, ExactTarget):
        raise TypeError(f"register_exact_target takes an ExactTarget, got {type(target).__name__}.")
    taken = [name for name in target.names if name in _all_names()]
    if taken:
        raise ValueError(f"An exact target named {taken[0]!r} is already registered; choose another name.")
    EXACT_TARGETS[target.name] = target
    return target


def _all_names() -> Iterator[str]:
    for target in EXACT_TARGETS.values():
        yield from target.names


def exact_target(name: str) -> ExactTarget:
    """The row of target ``name`` (or of one of its aliases)."""
    for target in EXACT_TARGETS.values():
        if name in target.names:
            return target
    raise ValueError(f"Unknown exact target {name!r}; registered targets are: {', '.join(map(repr, _all_names()))}.")


def find_exact_target(kernel: Kernel) -> ExactTarget | None:
    """The row ``kernel`` is a kernel of, the one whose class is nearest in ``type(kernel).__mro__`` (a subclass
    registered as its own target wins over its base); ``None`` if it is none of the table's."""
    matches = [target for target in EXACT_TARGETS.values() if target.matches(kernel)]
    mro = type(kernel).__mro__
    return min(matches, key=lambda target: mro.index(target.kernel_type), default=None)


def stationary_targets() -> tuple[StationaryTarget, ...]:
    """The stationary targets (random Fourier features), in table order."""
    return tuple(target for target in EXACT_TARGETS.values() if isinstance(target, StationaryTarget))


_BUILT_IN = (
    StationaryTarget(SPECTRA["rbf"], RBFKernel, aliases=("gaussian",)),
    *(
        StationaryTarget(spectrum, MaternKernel, nu=spectrum.nu)
        for spectrum in SPECTRA.values()
        if isinstance(spectrum, MaternSpectrum)
    ),
    ExactTarget("exponential", ExponentialDotProductKernel),
    ExactTarget("polynomial", ScaledPolynomialKernel),
    ExactTarget("offset_polynomial", PolynomialKernel),
    ExactTarget("linear", LinearKernel),
    *(ExactTarget(f"arccos{order}", ArcCosineKernel, order=order) for order in (0, 1)),
    ExactTarget("delta_gaussian", DeltaGaussianKernel),
    ExactTarget("spherical_polynomial", SphericalPolynomialKernel),
    ExactTarget("additive", ExactAdditiveKernel),
    ExactTarget("compositional", CompositionalKernel),
)
for _row in _BUILT_IN:
    register_exact_target(_row)
