"""LinearOperators and autograd functions for feature-root covariances."""

from gprf.operators.feature_root import FeatureRootAddedDiagLinearOperator, FeatureRootLinearOperator
from gprf.operators.weighted_gram import weighted_gram
from gprf.operators import exact_log_prob

exact_log_prob.install()

__all__ = ["FeatureRootAddedDiagLinearOperator", "FeatureRootLinearOperator", "weighted_gram"]
