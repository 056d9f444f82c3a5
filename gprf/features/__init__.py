"""Random feature maps (torch modules, no GPyTorch): x -> Phi(x)."""

from gprf.features.base import FeatureMap
from gprf.features.fourier import FOURIER_KERNELS, FOURIER_SAMPLERS, RandomFourierFeatures
from gprf.features.maclaurin import MaclaurinFeatures
from gprf.features.maclaurin_allocation import MaclaurinAllocation, optimize_maclaurin_allocation
from gprf.features.quadrature import QUADRATURE_KERNELS, QUADRATURE_ROTATIONS, QuadratureFeatures, arccos_kernel
from gprf.features.sketches import SKETCHES, PolynomialSketch
from gprf.features.spectral import SPECTRA, StationarySpectrum

__all__ = [
    "FOURIER_KERNELS",
    "FOURIER_SAMPLERS",
    "SKETCHES",
    "SPECTRA",
    "FeatureMap",
    "MaclaurinAllocation",
    "MaclaurinFeatures",
    "PolynomialSketch",
    "QUADRATURE_KERNELS",
    "QUADRATURE_ROTATIONS",
    "QuadratureFeatures",
    "RandomFourierFeatures",
    "StationarySpectrum",
    "arccos_kernel",
    "optimize_maclaurin_allocation",
]
