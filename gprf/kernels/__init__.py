"""GPyTorch kernels built on random feature maps."""

from gprf.kernels.compositional import CompositionalKernel, CompositionalRandomFeatureKernel
from gprf.kernels.dot_product import DotProductKernel, ExponentialDotProductKernel, ScaledPolynomialKernel
from gprf.kernels.feature_kernel import FeatureKernel
from gprf.kernels.feature_sum import FeatureSumKernel
from gprf.kernels.localized_maclaurin import LocalizedMaclaurinKernel
from gprf.kernels.maclaurin import MaclaurinKernel
from gprf.kernels.polynomial_sketch import PolynomialSketchKernel
from gprf.kernels.quadrature import ArcCosineKernel, QuadratureKernel
from gprf.kernels.random_feature_kernel import RandomFeatureKernel
from gprf.kernels.random_fourier import RandomFourierKernel
from gprf.kernels.signed import (
    DeltaGaussianKernel,
    SignedPartKernel,
    SignedRandomFeatureKernel,
    SphericalPolynomialKernel,
    krein_ridge_mean,
)

__all__ = [
    "ArcCosineKernel",
    "CompositionalKernel",
    "CompositionalRandomFeatureKernel",
    "DeltaGaussianKernel",
    "DotProductKernel",
    "ExponentialDotProductKernel",
    "FeatureKernel",
    "FeatureSumKernel",
    "LocalizedMaclaurinKernel",
    "MaclaurinKernel",
    "PolynomialSketchKernel",
    "QuadratureKernel",
    "RandomFeatureKernel",
    "RandomFourierKernel",
    "ScaledPolynomialKernel",
    "SignedPartKernel",
    "SignedRandomFeatureKernel",
    "SphericalPolynomialKernel",
    "krein_ridge_mean",
]
