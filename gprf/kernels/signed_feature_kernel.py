r"""Kernels given by two real roots and a signature, :math:`K = AA^\top - BB^\top`: indefinite kernels.

**Krein-space meaning.** An indefinite kernel :math:`k = k_+ - k_-` is the reproducing kernel of a Krein space
:math:`\mathcal K = \mathcal H_+ \ominus \mathcal H_-`, not of a Hilbert space, and it is not the covariance of any
Gaussian process. Kernel ridge regression still makes sense there (Ong et al. 2004; Oglic & Gärtner 2018): the
stationary point of the regularised risk is :math:`f(x_*) = k_*^\top(\hat K + \sigma^2 I)^{-1}y`, the same formula
as a GP posterior mean. gprf supports exactly that use: in an ``ExactGP`` with a Gaussian likelihood,
``model(x).mean`` is the Krein-space ridge solution (:math:`\sigma^2` = the likelihood noise, the ScaleKernel
outputscale scales :math:`\hat K`), and :func:`~gprf.prediction.krein_ridge_mean` computes it without a model.
The marginal likelihood (log-determinant), Cholesky factors, posterior variances and sampling need a PSD
covariance and raise :class:`~gprf.exceptions.IndefiniteKernelError`; ``kernel.psd_part()`` gives a PSD kernel
to use instead.

Reference: C. S. Ong, X. Mary, S. Canu, A. J. Smola. *Learning with Non-Positive Kernels.* International
Conference on Machine Learning (ICML), 2004.

Reference: D. Oglic, T. Gärtner. *Learning in Reproducing Kernel Kreĭn Spaces.* International Conference on
Machine Learning (ICML), 2018.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from gprf.kernels.feature_kernel import VisibleWrites, same_inputs
from gprf.linalg import SignedRootLinearOperator
from gprf.prediction import SignedPredictionStrategy


class SignedFeatureKernel(VisibleWrites, Kernel, ABC):
    r"""A GPyTorch kernel :math:`k(x, y) = a(x)^\top a(y) - b(x)^\top b(y)` given by two real roots.

    The sibling of :class:`~gprf.kernels.FeatureKernel` for indefinite kernels, which have no real root
    :math:`r` with :math:`rr^\top = k`. Subclasses implement :meth:`signed_features` and :attr:`root_dim` (columns
    of each root). ``kernel(X)`` is a :class:`~gprf.linalg.SignedRootLinearOperator`
    :math:`L\,\mathrm{diag}(\varsigma)L^\top` with :math:`L = [A, B]` and the signature
    :math:`\varsigma = (1, \ldots, 1, -1, \ldots, -1)` (never :math:`N\times N`), ``kernel(X, diag=True)`` its
    diagonal, and prediction uses :class:`~gprf.prediction.SignedPredictionStrategy` (the posterior mean only).
    """

    @abstractmethod
    def signed_features(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """The roots ``(A, B)`` ``(..., n, root_dim)`` of raw inputs (any lengthscale is applied inside)."""

    @property
    @abstractmethod
    def root_dim(self) -> int:
        """Number of columns of each root."""

    def signature(self, like: Tensor) -> Tensor:
        r""":math:`\varsigma`: ``root_dim`` ones then ``root_dim`` minus ones, with ``like``'s dtype and device."""
        signature = like.new_ones(2 * self.root_dim)
        signature[self.root_dim :] = -1.0
        return signature

    def _stacked_roots(self, x: Tensor) -> Tensor:
        positive, negative = self.signed_features(x)
        return torch.cat([positive, negative], dim=-1)

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params):
        if last_dim_is_batch:
            raise NotImplementedError(f"{type(self).__name__} does not support last_dim_is_batch.")
        r1 = self._stacked_roots(x1)
        r2 = r1 if same_inputs(x1, x2) else self._stacked_roots(x2)
        signature = self.signature(r1)
        if diag:
            return (r1 * r2 * signature).sum(-1)
        return SignedRootLinearOperator(r1, r2, signature)

    def prediction_strategy(self, train_inputs, train_prior_dist, train_labels, likelihood):
        return SignedPredictionStrategy(train_inputs, train_prior_dist, train_labels, likelihood)

    def __add__(self, other: Kernel) -> Kernel:
        raise TypeError(
            "Sums with a signed random-feature kernel are not supported; put every component in one spectrum "
            "(delta_gaussian_spectrum takes any number of weighted Gaussians)."
        )
