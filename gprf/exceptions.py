"""Warnings and errors raised by gprf.

Every warning gprf emits is a :class:`GPRFWarning`, so one filter silences or escalates all of them::

    warnings.simplefilter("error", gprf.GPRFWarning)

Each class also derives from the builtin (or linear_operator) category it used to have, so filters written
for those keep matching.
"""

from linear_operator.utils.warnings import NumericalWarning


class GPRFWarning(UserWarning):
    """Base class of every warning gprf emits (filter this one class to act on all of them)."""


class BudgetWarning(GPRFWarning, RuntimeWarning):
    """:func:`gprf.fit_mll` cannot run its exact refit at the model's number of features within ``time_budget``.

    Issued before the refit starts, with the estimated seconds and what the fit does instead: keep the largest
    nested prefix of the feature draws whose refit fits (``grow="fit"``), or run the full refit anyway
    (``grow="full"``, or draws that cannot be cut to a prefix).
    """


class ConjugateGradientWarning(GPRFWarning, NumericalWarning):
    """Conjugate gradients stopped at the iteration limit before reaching the requested residual.

    Also a linear_operator ``NumericalWarning``, the category GPyTorch's own solvers use for the same event.
    """


class DispatchFallbackWarning(GPRFWarning, RuntimeWarning):
    """A random-feature kernel could not use its feature-space prediction path.

    Raised when GPyTorch hands gprf's prediction strategy covariances it cannot factor into feature
    roots; prediction then falls back to GPyTorch's dense O(N^3) strategy. Turn the warning into an
    error with ``warnings.simplefilter("error", DispatchFallbackWarning)`` to find such models.
    """


class FitFallbackWarning(GPRFWarning, RuntimeWarning):
    """:func:`gprf.fit_mll` ended at an earlier point of the fit, because the model could not predict at the last.

    The message names the stage whose hyperparameters were kept and the numerical error at the end point.
    """


class IndefiniteKernelError(ValueError):
    """A PSD covariance was required from an indefinite kernel approximation."""


class InfiniteVarianceWarning(GPRFWarning):
    """A random-feature estimator is unbiased but has infinite variance in this configuration."""


class LowRankStructureWarning(GPRFWarning):
    """An operation on random-feature kernels loses the low-rank root (dense N x N covariance)."""


class OversizedFeaturesWarning(GPRFWarning):
    """A model with far more random features than its training points need is refitted again and again (a Bayesian
    optimisation loop); :func:`gprf.suggest_num_features` gives the number the points need."""


class NonFiniteTrainingDataError(ValueError):
    """Training inputs, targets or noise variances hold NaN or infinite values (their count is in the message)."""


class DenseCovarianceWarning(GPRFWarning):
    """The training covariance of an exact kernel that gprf evaluates lazily (``PreconditionedKernel``) is formed as a
    dense N x N matrix above linear_operator's ``max_cholesky_size`` (correct, but O(N^2) memory and O(N^3) time)."""


class ShardMismatchError(ValueError):
    """The processes of a sharded computation (:mod:`gprf.distributed`) disagree on what they should share: the step
    they are at, the model's layout (number of features, input dimension, dtype, device type), its random features or
    hyperparameters. Raised on every process alike, before a sum mixes different models; the message names the
    processes (ranks) and what differs."""


class CollectiveError(TimeoutError):
    """A collective of :mod:`gprf.distributed` did not complete: a process waited past the process group's timeout
    for the others, or a peer failed. The message names this process's rank and the step; the process group cannot be
    used afterwards. Not a ``RuntimeError``, so that code which recovers from numerical failures (``except
    RuntimeError``) does not swallow it and go on alone."""
