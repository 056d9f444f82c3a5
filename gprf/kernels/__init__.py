"""GPyTorch kernels built on random feature maps, (re-exported from :mod:`gprf.kernels.exact`) the exact kernels
they approximate, and exact kernels preconditioned by them."""

from gprf.kernels import exact
from gprf.kernels.additive_feature_kernel import AdditiveFeatureKernel
from gprf.kernels.arc_cosine_quadrature import ArcCosineQuadratureKernel
from gprf.kernels.compositional import CompositionalRandomFeatureKernel

# The exact targets live in gprf.kernels.exact; re-exported here, where they have always been importable from.
from gprf.kernels.exact import (
    ArcCosineKernel,
    CompositionalKernel,
    DeltaGaussianKernel,
    DotProductKernel,
    ExactAdditiveKernel,
    ExponentialDotProductKernel,
    ScaledPolynomialKernel,
    SphericalPolynomialKernel,
)
from gprf.kernels.exact_expression import exact_expression
from gprf.kernels.expressions import is_feature_expression, root_columns
from gprf.kernels.feature_kernel import FeatureKernel, FeatureSumKernel, is_feature_kernel, unwrap_scale_kernel
from gprf.kernels.feature_map_owner import FeatureMapOwner
from gprf.kernels.feature_product_kernel import FeatureProductKernel
from gprf.kernels.index_root_kernel import IndexRootKernel
from gprf.kernels.linear_feature_kernel import LinearFeatureKernel
from gprf.kernels.localized_maclaurin import LocalizedMaclaurinKernel
from gprf.kernels.maclaurin import MaclaurinKernel
from gprf.kernels.offset_polynomial_sketch import OffsetPolynomialSketchKernel
from gprf.kernels.polynomial_sketch import PolynomialSketchKernel
from gprf.kernels.preconditioned_kernel import PreconditionedKernel
from gprf.kernels.quadrature import QuadratureKernel
from gprf.kernels.random_feature_kernel import RandomFeatureKernel
from gprf.kernels.random_fourier import RandomFourierKernel
from gprf.kernels.root_products import multiply_roots  # noqa: F401  (registers GPyTorch's products of roots)
from gprf.kernels.signed_feature_kernel import SignedFeatureKernel
from gprf.kernels.signed_part import SignedPartKernel
from gprf.kernels.signed_random_feature_kernel import SignedRandomFeatureKernel

__all__ = [
    "AdditiveFeatureKernel",
    "ArcCosineKernel",
    "ArcCosineQuadratureKernel",
    "CompositionalKernel",
    "CompositionalRandomFeatureKernel",
    "DeltaGaussianKernel",
    "DotProductKernel",
    "ExactAdditiveKernel",
    "ExponentialDotProductKernel",
    "FeatureKernel",
    "FeatureMapOwner",
    "FeatureProductKernel",
    "FeatureSumKernel",
    "IndexRootKernel",
    "LinearFeatureKernel",
    "LocalizedMaclaurinKernel",
    "MaclaurinKernel",
    "OffsetPolynomialSketchKernel",
    "PolynomialSketchKernel",
    "PreconditionedKernel",
    "QuadratureKernel",
    "RandomFeatureKernel",
    "RandomFourierKernel",
    "ScaledPolynomialKernel",
    "SignedFeatureKernel",
    "SignedPartKernel",
    "SignedRandomFeatureKernel",
    "SphericalPolynomialKernel",
    "exact",
    "exact_expression",
    "is_feature_expression",
    "is_feature_kernel",
    "root_columns",
    "unwrap_scale_kernel",
]
