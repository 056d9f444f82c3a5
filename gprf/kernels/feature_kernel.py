"""Kernels given by a real feature root: K(X1, X2) = R(X1) R(X2)^T."""

from __future__ import annotations

import warnings
from abc import abstractmethod

import torch
from gpytorch.kernels import Kernel
from linear_operator.operators import MatmulLinearOperator
from torch import Tensor

from gprf.exceptions import LowRankStructureWarning
from gprf.operators import FeatureRootLinearOperator
from gprf.prediction import FeatureSpacePredictionStrategy


def same_inputs(x1: Tensor, x2: Tensor) -> bool:
    """Whether ``x1`` and ``x2`` hold the same points.

    GPyTorch passes the same tensor (or equal views of one storage) for training covariances, which is
    recognised without a host synchronisation; only distinct tensors of equal shape are compared.
    """
    if x1 is x2:
        return True
    if x1.shape != x2.shape:
        return False
    if x1.data_ptr() == x2.data_ptr() and x1.stride() == x2.stride():
        return True
    return torch.equal(x1, x2)


class FeatureKernel(Kernel):
    r"""A GPyTorch kernel :math:`k(x, y) = r(x)^\top r(y)` given by a real feature root :math:`r`.

    Subclasses implement :meth:`features`. Evaluations never form an :math:`N\times N` matrix:
    ``kernel(X)`` is a :class:`~gprf.operators.FeatureRootLinearOperator` (a ``LowRankRootLinearOperator``
    whose sum with the likelihood noise evaluates the marginal likelihood through the Woodbury identity and
    the matrix determinant lemma at :math:`O(NF^2)`, factored in float64), ``kernel(X1, X2)`` a
    ``MatmulLinearOperator``, and prediction uses
    :class:`~gprf.prediction.FeatureSpacePredictionStrategy`.

    Sums of feature kernels should be built with ``+`` between feature kernels (or
    :class:`~gprf.kernels.FeatureSumKernel`), which concatenates roots; GPyTorch's ``AdditiveKernel`` and
    ``ProductKernel`` would make the covariance dense.
    """

    @abstractmethod
    def features(self, x: Tensor) -> Tensor:
        """Real feature root ``(..., n, F)`` of *raw* inputs (any lengthscale is applied inside)."""

    @property
    @abstractmethod
    def num_features(self) -> int:
        """Number of columns ``F`` of the real root returned by :meth:`features`."""

    def forward(
        self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params
    ) -> Tensor | FeatureRootLinearOperator | MatmulLinearOperator:
        if last_dim_is_batch:
            raise NotImplementedError(
                f"{type(self).__name__} does not support last_dim_is_batch (deprecated in GPyTorch); "
                "build one kernel per input dimension instead."
            )
        r1 = self.features(x1)
        r2 = r1 if same_inputs(x1, x2) else self.features(x2)
        if diag:
            return (r1 * r2).sum(-1)
        if r2 is r1:
            return FeatureRootLinearOperator(r1)
        return MatmulLinearOperator(r1, r2.mT)

    def prediction_strategy(self, train_inputs, train_prior_dist, train_labels, likelihood):
        return FeatureSpacePredictionStrategy(train_inputs, train_prior_dist, train_labels, likelihood)

    def __add__(self, other: Kernel) -> Kernel:
        from gprf.kernels.feature_sum import FeatureSumKernel, is_feature_kernel

        if is_feature_kernel(other):
            return FeatureSumKernel(self, other)
        warnings.warn(
            f"Adding {type(other).__name__} to a random-feature kernel gives a GPyTorch AdditiveKernel whose "
            "covariance is dense (O(N^3) training); add random-feature kernels only to each other.",
            LowRankStructureWarning,
            stacklevel=2,
        )
        return super().__add__(other)

    def __mul__(self, other: Kernel) -> Kernel:
        raise TypeError(
            "Products of random-feature kernels are not supported: GPyTorch's ProductKernel multiplies the "
            "covariances elementwise, which destroys the low-rank feature root (dense N x N training). "
            "Use a single feature map on the joint input, or wrap the kernel in ScaleKernel for an amplitude."
        )
