r"""A low-rank root of the inverse of a positive definite operator on a given subspace (Rayleigh–Ritz)."""

from __future__ import annotations

import torch
from linear_operator.operators import LinearOperator
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from gprf.linalg.capacitance import solve_triangular
from gprf.settings import factor_dtype


def ritz_inverse_root(operator: LinearOperator, basis: Tensor) -> Tensor:
    r"""A root :math:`R` ``(*batch, N, r)`` of :math:`Q(Q^\top AQ)^{-1}Q^\top \approx A^{-1}`, with :math:`Q` an
    orthonormal basis of the columns of ``basis`` ``(*batch, N, r)`` and :math:`A` the positive definite ``operator``.

    :math:`R = QL^{-\top}` with :math:`Q^\top AQ = LL^\top`. For every :math:`k`, :math:`k^\top RR^\top k =
    \max_{u\in\mathrm{span}\,Q}(2u^\top k - u^\top Au) \le k^\top A^{-1}k`, with equality when :math:`A^{-1}k` lies in
    the subspace (the Galerkin property LOVE's Lanczos subspace also has; Pleiss et al., 2018): so predictive
    variances :math:`k_{**} - k_*^\top RR^\top k_*` are never smaller than the exact ones. Costs one product of
    :math:`A` with :math:`r` columns, a QR and an :math:`r\times r` Cholesky factorisation (both in
    :class:`gprf.settings.factor_dtype`).
    """
    dtype = factor_dtype.value()
    orthonormal = torch.linalg.qr(basis.to(dtype)).Q
    projected = orthonormal.mT @ operator.matmul(orthonormal.to(operator.dtype)).to(dtype)
    cholesky = psd_safe_cholesky((projected + projected.mT) / 2)
    return solve_triangular(cholesky, orthonormal.mT, upper=False).mT.to(operator.dtype)
