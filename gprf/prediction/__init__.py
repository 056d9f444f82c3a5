"""Prediction strategies for random-feature GPs (never form an N x N matrix), the indefinite posterior mean, and the
random-feature-preconditioned exact GP."""

from gprf.prediction.complex_feature import ComplexFeaturePredictionStrategy
from gprf.prediction.feature_space import FeatureSpacePredictionStrategy, PointsSpacePosterior, WeightSpacePosterior
from gprf.prediction.localized import LocalizedPredictionStrategy
from gprf.prediction.preconditioned import PreconditionedPredictionStrategy
from gprf.prediction.signed import SignedPredictionStrategy, krein_ridge_mean

__all__ = [
    "ComplexFeaturePredictionStrategy",
    "FeatureSpacePredictionStrategy",
    "LocalizedPredictionStrategy",
    "PointsSpacePosterior",
    "PreconditionedPredictionStrategy",
    "SignedPredictionStrategy",
    "WeightSpacePosterior",
    "krein_ridge_mean",
]
