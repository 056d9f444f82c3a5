r"""The placeholder posterior covariance of an indefinite-kernel model."""

from __future__ import annotations

import torch
from linear_operator.operators import LinearOperator
from torch import Tensor

from gprf.linalg.indefinite_guard import IndefiniteGuard, indefinite_error


class IndefinitePosteriorCovariance(IndefiniteGuard, LinearOperator):
    r"""Placeholder for the posterior covariance of an indefinite-kernel model: shapes only, any use raises.

    :math:`k_{**} - k_{*}^\top(\hat K + \Sigma)^{-1}k_*` is not a covariance when :math:`\hat K` is indefinite (it can
    be negative), so the predictive distribution of such a model carries its mean only.
    """

    def __init__(self, reference: Tensor) -> None:
        super().__init__(reference)
        self.reference = reference  # (..., m): gives batch shape, size, dtype and device

    def _size(self) -> torch.Size:
        return torch.Size((*self.reference.shape, self.reference.size(-1)))

    def _transpose_nonbatch(self) -> IndefinitePosteriorCovariance:
        return self

    def _expand_batch(self, batch_shape: torch.Size) -> IndefinitePosteriorCovariance:
        return IndefinitePosteriorCovariance(self.reference.expand(*batch_shape, self.reference.size(-1)))

    def _matmul(self, rhs: Tensor) -> Tensor:
        raise indefinite_error("A posterior covariance (variances, sampling, confidence regions)")

    def _diagonal(self) -> Tensor:
        raise indefinite_error("A posterior variance")

    def to_dense(self) -> Tensor:
        raise indefinite_error("A posterior covariance")

    def _get_indices(self, *args) -> Tensor:
        raise indefinite_error("A posterior covariance")
