"""Prediction strategies for random-feature GPs (never form an N x N matrix)."""

from gprf.prediction.capacitance import CapacitanceFactor
from gprf.prediction.feature_space import (
    ComplexFeaturePredictionStrategy,
    FeatureSpacePredictionStrategy,
    WeightSpacePosterior,
)
from gprf.prediction.localized import CentredFeatureRootLinearOperator, LocalizedPredictionStrategy

__all__ = [
    "CapacitanceFactor",
    "CentredFeatureRootLinearOperator",
    "ComplexFeaturePredictionStrategy",
    "FeatureSpacePredictionStrategy",
    "LocalizedPredictionStrategy",
    "WeightSpacePosterior",
]
