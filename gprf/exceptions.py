"""Warnings and errors raised by gprf."""


class DispatchFallbackWarning(RuntimeWarning):
    """A random-feature kernel could not use its feature-space prediction path.

    Raised when GPyTorch hands gprf's prediction strategy covariances it cannot factor into feature
    roots; prediction then falls back to GPyTorch's dense O(N^3) strategy. Turn the warning into an
    error with ``warnings.simplefilter("error", DispatchFallbackWarning)`` to find such models.
    """


class IndefiniteKernelError(ValueError):
    """A PSD covariance was required from an indefinite kernel approximation."""


class LowRankStructureWarning(UserWarning):
    """An operation on random-feature kernels loses the low-rank root (dense N x N covariance)."""


class NonFiniteTrainingDataError(ValueError):
    """Training inputs, targets or noise variances hold NaN or infinite values (their count is in the message)."""


class DenseCovarianceWarning(UserWarning):
    """The training covariance of an exact kernel that gprf evaluates lazily (``PreconditionedKernel``) is formed as a
    dense N x N matrix above linear_operator's ``max_cholesky_size`` (correct, but O(N^2) memory and O(N^3) time)."""
