"""Fitting the hyperparameters of random-feature GPs: the one-call recipe and the exact scale fit at fixed features."""

from gprf.fitting.recipe import fit_mll
from gprf.fitting.scale_fit import ScaleFitResult, fit_scale_hyperparameters
from gprf.fitting.scale_statistics import FeatureSums, ScaleStatistics

__all__ = [
    "FeatureSums",
    "ScaleFitResult",
    "ScaleStatistics",
    "fit_mll",
    "fit_scale_hyperparameters",
]
