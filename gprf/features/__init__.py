"""Random feature maps (torch modules, no GPyTorch): x -> Phi(x)."""

from gprf.features.additive import ADDITIVE_ORDERS, AdditiveFourierFeatures
from gprf.features.base import FeatureMap, FeatureMapBase, SignedFeatureMap, real_root
from gprf.features.compositional import CompositionalFeatures
from gprf.features.dual_activations import ACTIVATIONS, DualActivation
from gprf.features.fourier import FOURIER_KERNELS, FOURIER_SAMPLERS, RandomFourierFeatures
from gprf.features.maclaurin import MaclaurinFeatures
from gprf.features.maclaurin_allocation import MaclaurinAllocation, optimize_maclaurin_allocation
from gprf.features.quadrature import QUADRATURE_KERNELS, QUADRATURE_ROTATIONS, QuadratureFeatures, arccos_kernel
from gprf.features.signed import SIGNED_SAMPLERS, SignedRandomFeatures
from gprf.features.signed_spectra import (
    DeltaGaussianSpectrum,
    SignedRadialSpectrum,
    SphericalPolynomialSpectrum,
    check_unit_norm,
    delta_gaussian_spectrum,
    spherical_polynomial_spectrum,
)
from gprf.features.skeleton import BASE_KERNELS, InputNode, InternalNode, Skeleton
from gprf.features.sketches import SKETCHES, PolynomialSketch
from gprf.features.spectral import SPECTRA, GaussianSpectrum, MaternSpectrum, StationarySpectrum, stationary_spectrum

__all__ = [
    "ADDITIVE_ORDERS",
    "ACTIVATIONS",
    "AdditiveFourierFeatures",
    "BASE_KERNELS",
    "CompositionalFeatures",
    "DeltaGaussianSpectrum",
    "DualActivation",
    "FOURIER_KERNELS",
    "FOURIER_SAMPLERS",
    "FeatureMap",
    "FeatureMapBase",
    "GaussianSpectrum",
    "InputNode",
    "InternalNode",
    "MaclaurinAllocation",
    "MaclaurinFeatures",
    "MaternSpectrum",
    "PolynomialSketch",
    "QUADRATURE_KERNELS",
    "QUADRATURE_ROTATIONS",
    "QuadratureFeatures",
    "RandomFourierFeatures",
    "SIGNED_SAMPLERS",
    "SKETCHES",
    "SPECTRA",
    "SignedRadialSpectrum",
    "SignedFeatureMap",
    "SignedRandomFeatures",
    "Skeleton",
    "SphericalPolynomialSpectrum",
    "StationarySpectrum",
    "arccos_kernel",
    "check_unit_norm",
    "delta_gaussian_spectrum",
    "optimize_maclaurin_allocation",
    "real_root",
    "spherical_polynomial_spectrum",
    "stationary_spectrum",
]
