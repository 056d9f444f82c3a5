"""Approximating GPyTorch kernel expressions by gprf feature kernels: :func:`gprf.random_features`, its budget rule and
the registry of per-kernel-type translations."""

from gprf.conversion.budget import Budget, split_evenly
from gprf.conversion.moments import approximation_moments
from gprf.conversion.random_features import random_features
from gprf.conversion.registry import Context, find_translation, register_translation, translate

__all__ = [
    "Budget",
    "approximation_moments",
    "Context",
    "find_translation",
    "random_features",
    "register_translation",
    "split_evenly",
    "translate",
]
