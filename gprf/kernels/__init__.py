"""GPyTorch kernels built on random feature maps."""

from gprf.kernels.dot_product import DotProductKernel, ExponentialDotProductKernel, ScaledPolynomialKernel
from gprf.kernels.feature_kernel import FeatureKernel
from gprf.kernels.feature_sum import FeatureSumKernel
from gprf.kernels.maclaurin import MaclaurinKernel
from gprf.kernels.polynomial_sketch import PolynomialSketchKernel
from gprf.kernels.quadrature import ArcCosineKernel, QuadratureKernel
from gprf.kernels.random_feature_kernel import RandomFeatureKernel
from gprf.kernels.random_fourier import RandomFourierKernel

__all__ = [
    "ArcCosineKernel",
    "DotProductKernel",
    "ExponentialDotProductKernel",
    "FeatureKernel",
    "FeatureSumKernel",
    "MaclaurinKernel",
    "PolynomialSketchKernel",
    "QuadratureKernel",
    "RandomFeatureKernel",
    "RandomFourierKernel",
    "ScaledPolynomialKernel",
]
