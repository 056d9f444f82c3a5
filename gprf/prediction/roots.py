"""Recover feature roots from the LinearOperators GPyTorch hands to a prediction strategy."""

from __future__ import annotations

from gpytorch.lazy import LazyEvaluatedKernelTensor
from linear_operator import to_dense
from linear_operator.operators import (
    AddedDiagLinearOperator,
    ConstantMulLinearOperator,
    LinearOperator,
    RootLinearOperator,
)
from torch import Tensor


def symmetric_root(covar: LinearOperator | Tensor) -> Tensor | None:
    r"""A dense ``R`` with ``covar = R Rᵀ``, or ``None`` when ``covar`` is not a (scaled) root operator.

    Handles what random-feature kernels produce directly or through :class:`~gpytorch.kernels.ScaleKernel`:
    (lazily evaluated) :class:`RootLinearOperator`/``LowRankRootLinearOperator``, possibly multiplied by
    a positive constant.
    """
    if isinstance(covar, LazyEvaluatedKernelTensor):
        covar = covar.evaluate_kernel()
    if isinstance(covar, RootLinearOperator):
        return to_dense(covar.root)
    if isinstance(covar, ConstantMulLinearOperator):
        root = symmetric_root(covar.base_linear_op)
        if root is None:
            return None
        return root * covar.expanded_constant.sqrt().unsqueeze(-1).unsqueeze(-1)
    return None


def noise_diagonal(observed_covar: LinearOperator | Tensor) -> Tensor | None:
    """The diagonal noise of ``K + D`` as produced by Gaussian likelihoods, or ``None``."""
    if isinstance(observed_covar, AddedDiagLinearOperator):
        return observed_covar._diag_tensor.diagonal(dim1=-2, dim2=-1)
    return None
