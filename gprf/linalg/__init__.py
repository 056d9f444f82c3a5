"""The linear-algebra layer: feature-root covariances, their one decoder, and the factorisations behind them.

A gprf feature kernel evaluates to a :class:`FeatureRootLinearOperator`; :func:`feature_root` reads any
covariance built from it back as a :class:`FeatureRoot` (root, amplitude, noise, extras) and
:func:`covariance_root` evaluates a module and reads its covariance back (or says why it cannot);
:func:`factor_capacitance` is where every :math:`F\\times F` capacitance is formed and factored (in
:class:`gprf.settings.factor_dtype`), :func:`factor_points` the :math:`N\\times N` covariance where that is cheaper
(:func:`choose_route`). The indefinite operators serve signed random-feature kernels; the exact-kernel
operators serve :class:`gprf.kernels.PreconditionedKernel` (an exact kernel preconditioned by its random features).
"""

from gprf.linalg.capacitance import CapacitanceFactor, capacitance_sums, factor_capacitance, weighted_sums
from gprf.linalg.cg_iteration_count import cg_iterations
from gprf.linalg.cholesky_terms import cholesky_inv_quad_logdet
from gprf.linalg.decode import covariance_root, feature_root
from gprf.linalg.exact_kernel_operator import ExactKernelLinearOperator
from gprf.linalg.feature_root import FeatureRoot
from gprf.linalg.feature_root_added_diag_operator import FeatureRootAddedDiagLinearOperator
from gprf.linalg.feature_root_operator import FeatureRootLinearOperator
from gprf.linalg.feature_root_preconditioner import FeatureRootPreconditioner
from gprf.linalg.indefinite_dense_added_diag_operator import IndefiniteDenseAddedDiagLinearOperator
from gprf.linalg.indefinite_dense_operator import IndefiniteDenseLinearOperator
from gprf.linalg.indefinite_guard import IndefiniteGuard, indefinite_error
from gprf.linalg.indefinite_posterior_covariance import IndefinitePosteriorCovariance
from gprf.linalg.lazy_features import LazyFeatures
from gprf.linalg.nystrom_preconditioner import NystromPreconditioner
from gprf.linalg.points_factor import PointsFactor, factor_points, points_gram
from gprf.linalg.preconditioned_added_diag_operator import PreconditionedAddedDiagLinearOperator
from gprf.linalg.ritz_inverse import ritz_inverse_root
from gprf.linalg.route import choose_route, route_costs
from gprf.linalg.signed_root_added_diag_operator import SignedRootAddedDiagLinearOperator
from gprf.linalg.signed_root_operator import SignedRootLinearOperator
from gprf.linalg.weight_space_cg import CGTerms, WeightSpaceCGState, cg_inv_quad_logdet
from gprf.linalg.weighted_gram import symmetric_gram, weighted_gram, weighted_gram_projection

__all__ = [
    "CGTerms",
    "CapacitanceFactor",
    "ExactKernelLinearOperator",
    "FeatureRoot",
    "FeatureRootAddedDiagLinearOperator",
    "FeatureRootLinearOperator",
    "FeatureRootPreconditioner",
    "IndefiniteDenseAddedDiagLinearOperator",
    "IndefiniteDenseLinearOperator",
    "IndefiniteGuard",
    "IndefinitePosteriorCovariance",
    "LazyFeatures",
    "NystromPreconditioner",
    "PointsFactor",
    "PreconditionedAddedDiagLinearOperator",
    "SignedRootAddedDiagLinearOperator",
    "SignedRootLinearOperator",
    "WeightSpaceCGState",
    "capacitance_sums",
    "cg_inv_quad_logdet",
    "cg_iterations",
    "cholesky_inv_quad_logdet",
    "choose_route",
    "covariance_root",
    "factor_capacitance",
    "factor_points",
    "feature_root",
    "indefinite_error",
    "points_gram",
    "ritz_inverse_root",
    "route_costs",
    "symmetric_gram",
    "weighted_gram",
    "weighted_gram_projection",
    "weighted_sums",
]
