"""The exact kernels gprf approximates (the targets, separate from the approximations) and the table that names
them (:mod:`gprf.kernels.exact.targets`). The kernels are re-exported by :mod:`gprf.kernels`."""

from gprf.kernels.exact.additive import ExactAdditiveKernel
from gprf.kernels.exact.arc_cosine import ArcCosineKernel
from gprf.kernels.exact.compositional import CompositionalKernel
from gprf.kernels.exact.delta_gaussian import DeltaGaussianKernel
from gprf.kernels.exact.dot_product import DotProductKernel, ExponentialDotProductKernel, ScaledPolynomialKernel
from gprf.kernels.exact.spherical_polynomial import SphericalPolynomialKernel
from gprf.kernels.exact.targets import (
    EXACT_TARGETS,
    ExactTarget,
    StationaryTarget,
    exact_target,
    find_exact_target,
    register_exact_target,
    stationary_targets,
)

__all__ = [
    "EXACT_TARGETS",
    "ArcCosineKernel",
    "CompositionalKernel",
    "DeltaGaussianKernel",
    "DotProductKernel",
    "ExactAdditiveKernel",
    "ExactTarget",
    "ExponentialDotProductKernel",
    "ScaledPolynomialKernel",
    "SphericalPolynomialKernel",
    "StationaryTarget",
    "exact_target",
    "find_exact_target",
    "register_exact_target",
    "stationary_targets",
]
