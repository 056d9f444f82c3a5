"""Fitting the hyperparameters of random-feature GPs: the exact scale fit at fixed features."""

from gprf.fitting.scale_fit import ScaleFitResult, fit_scale_hyperparameters
from gprf.fitting.scale_statistics import ScaleStatistics

__all__ = [
    "ScaleFitResult",
    "ScaleStatistics",
    "fit_scale_hyperparameters",
]
