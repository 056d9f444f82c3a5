r"""The points route of a feature-root covariance: :math:`K = s\,RR^\top + \Sigma` formed and factored as an
:math:`N\times N` matrix (:func:`gprf.linalg.choose_route` decides when that is cheaper than the capacitance)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from gprf.linalg.capacitance import checked_cholesky, nonfinite_rows, raise_for_nonfinite_rows, solve_triangular
from gprf.linalg.feature_root import FeatureRoot
from gprf.linalg.weighted_gram import symmetric_gram
from gprf.settings import factor_dtype


class _PointsGram(torch.autograd.Function):
    @staticmethod
    def forward(ctx, features: Tensor) -> Tensor:
        ctx.save_for_backward(features)
        return symmetric_gram(features.mT)

    @staticmethod
    def backward(ctx, grad_gram: Tensor) -> Tensor:
        (features,) = ctx.saved_tensors
        # d(Phi Phi^T) = dPhi Phi^T + Phi dPhi^T: one N x N x F product, where autograd takes one per operand.
        return (grad_gram + grad_gram.mT) @ features


def points_gram(features: Tensor) -> Tensor:
    r""":math:`\Phi\Phi^\top` for real ``features`` ``(..., N, F)``, with the one-GEMM backward
    :math:`\bar\Phi = (\bar K + \bar K^\top)\Phi`: :math:`2N^2F` multiply-adds forward and backward instead of
    :math:`3N^2F` (the points route's marginal likelihood at tens of points spends most of its arithmetic here)."""
    if not torch.is_tensor(features) or features.dim() < 2:
        shape = tuple(features.shape) if torch.is_tensor(features) else type(features).__name__
        raise ValueError(f"points_gram: features must be a tensor of shape (..., N, F), got {shape}.")
    if features.is_complex() or not features.is_floating_point():
        raise TypeError(
            f"points_gram: features must be real floating-point (a complex root's Gram needs its conjugate), got "
            f"{features.dtype}."
        )
    return _PointsGram.apply(features)


@dataclass(frozen=True)
class PointsFactor:
    r"""The lower Cholesky factor :math:`L` of :math:`K = \tilde\Phi\tilde\Phi^\top + \Sigma` and the scaled features
    :math:`\tilde\Phi = \sqrt s\,R` ``(*batch, N, F)``, both in the factor dtype."""

    cholesky: Tensor
    features: Tensor

    def solve(self, rhs: Tensor) -> Tensor:
        """:math:`K^{-1}\\,\\text{rhs}` for ``rhs`` ``(..., N, k)``."""
        return solve_triangular(self.cholesky.mT, solve_triangular(self.cholesky, rhs, upper=False), upper=True)

    def whiten(self, rhs: Tensor) -> Tensor:
        """:math:`L^{-1}\\,\\text{rhs}` for ``rhs`` ``(..., N, k)``."""
        return solve_triangular(self.cholesky, rhs, upper=False)


def factor_points(root: FeatureRoot, rhs: Tensor | None = None) -> PointsFactor:
    r"""Form :math:`K = s\,RR^\top + \Sigma` from a root with its noise and factor it, in the factor dtype:
    :math:`O(N^2F + N^3)`.

    Non-finite training rows (features, noise or the right-hand sides ``rhs`` ``(..., N, k)`` that will be solved
    against, checked with the factor's one synchronisation) raise :class:`~gprf.exceptions.NonFiniteTrainingDataError`
    with their count.
    """
    if root.noise is None:
        raise ValueError("Factoring a feature root needs its noise variances (a covariance with a likelihood).")
    dtype = factor_dtype.value()
    features = root.scaled_features().to(dtype)
    noise = root.noise.to(dtype).expand(*features.shape[:-1])
    covariance = points_gram(features) + torch.diag_embed(noise)
    cholesky = checked_cholesky(covariance, lambda: raise_for_nonfinite_rows(nonfinite_rows(features, noise, rhs)), rhs)
    return PointsFactor(cholesky, features)
