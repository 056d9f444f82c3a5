r"""Eigenvalues of a symmetric matrix and a few right-hand sides in its eigenbasis, without its eigenvectors.

For a symmetric :math:`G = V\Lambda V^\top \in \mathbb R^{F\times F}` and :math:`k \ll F` right-hand sides
:math:`R \in \mathbb R^{F\times k}`, :func:`spectral_projections` returns :math:`\lambda` and :math:`V^\top R`.
Forming :math:`V` (``torch.linalg.eigh``: LAPACK ``?syevd``) costs several times a solve for the eigenvalues alone;
on the CPU it is avoided in three steps:

1. Householder tridiagonalisation :math:`G = Q T Q^\top` (LAPACK ``dsytrd``, :math:`\tfrac43 F^3` flops, the cost of
   ``eigvalsh``). With ``uplo='L'``, :math:`Q = H_1 H_2\cdots H_{F-1}`, :math:`H_i = I - \tau_i v_i v_i^\top`,
   :math:`v_i = (0_{i-1}, 1, u_i)` (1-based, the 1 at row :math:`i + 1`) whose tail :math:`u_i` ``dsytrd`` leaves
   below the subdiagonal of column :math:`i`; :math:`T` has diagonal ``d`` and off-diagonal ``e``.
2. :math:`Q^\top R = H_{F-1}\cdots H_2 H_1 R` (each :math:`H_i` is symmetric): the reflectors applied in order,
   :math:`R_{i+1:} \leftarrow R_{i+1:} - \tau_i v_i (v_i^\top R_{i+1:})`, :math:`O(F^2 k)` (the ``?ormtr`` that
   scipy does not wrap).
3. :math:`T = S\Lambda S^\top` by divide and conquer (LAPACK ``dstevd``, i.e. ``dstedc``), and
   :math:`V^\top R = S^\top(Q^\top R)` since :math:`V = QS`. The MRRR algorithm (``dstemr``, all eigenvectors in
   :math:`O(F^2)` flops) measured 3-5x slower than ``dstevd`` at :math:`F = 1024`-:math:`4096` on one thread
   (``dstedc`` deflates and runs its updates as matrix products), and both are small next to step 1.

Steps 2-3 cost :math:`O(F^2 k)` plus the tridiagonal solve; step 1 is what ``eigvalsh`` costs as well, whereas
``eigh`` also back-transforms the eigenvectors (``dormtr``, another :math:`2F^3`) and runs ``dstedc`` on them.

Eigenvectors are defined up to sign, and within a repeated eigenvalue up to a rotation of its eigenspace: the
columns of :math:`V^\top R` are as well, but the products :math:`(V^\top r)_i (V^\top r')_i` summed over each
eigenspace (all that :class:`~gprf.fitting.ScaleStatistics` uses, through :math:`\sum_i f(\lambda_i) a_i b_i`) are
not, so both routes give the same marginal likelihood.

CUDA tensors, dtypes other than float64 and tensors that require gradients take ``torch.linalg.eigh`` (on a GPU it
is fast and numpy cannot reach the data); ``method="eigh"`` forces that route.
"""

from __future__ import annotations

import itertools
from typing import Literal

import numpy as np
import torch
from scipy.linalg.lapack import dstevd, dsytrd, dsytrd_lwork
from torch import Tensor

__all__ = ["spectral_projections"]


def _tridiagonal_route(gram: np.ndarray, rhs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(eigenvalues (F,), V^T rhs (F, k))`` of one symmetric float64 ``gram (F, F)`` (module docstring, 1-3)."""
    size = gram.shape[0]
    if size == 1:
        return gram[0].copy(), rhs.copy()
    lwork, info = dsytrd_lwork(size, lower=1)
    if info != 0:
        raise RuntimeError(f"LAPACK dsytrd_lwork failed with info = {info}.")
    # A Fortran-ordered copy (dsytrd overwrites it) whose lower triangle, as torch.linalg.eigh's, is read.
    factor, diagonal, off_diagonal, tau, info = dsytrd(
        np.array(gram, order="F", copy=True), lower=1, lwork=int(lwork), overwrite_a=1
    )
    if info != 0:
        raise RuntimeError(f"LAPACK dsytrd failed with info = {info}.")
    rotated = np.array(rhs, dtype=np.float64, order="C", copy=True)
    for i in range(size - 1):
        if tau[i] == 0.0:
            continue
        # v = (1, factor[i + 2:, i]) acts on rows i + 1: (0-based) of the right-hand sides.
        tail = factor[i + 2 :, i]
        block = rotated[i + 1 :]
        weights = tau[i] * (block[0] + tail @ block[1:])
        block[0] -= weights
        block[1:] -= np.outer(tail, weights)
    eigenvalues, tridiagonal_vectors, info = dstevd(diagonal, off_diagonal, compute_v=1)
    if info != 0:
        raise RuntimeError(f"LAPACK dstevd failed with info = {info}.")
    return eigenvalues, tridiagonal_vectors.T @ rotated


def _use_eigh(gram: Tensor, rhs: Tensor) -> bool:
    return (
        gram.device.type != "cpu"
        or rhs.device.type != "cpu"
        or gram.dtype != torch.float64
        or rhs.dtype != torch.float64
        or (torch.is_grad_enabled() and (gram.requires_grad or rhs.requires_grad))
        or gram.size(-1) == 0
    )


def spectral_projections(
    gram: Tensor, rhs: Tensor, method: Literal["auto", "eigh", "tridiagonal"] = "auto"
) -> tuple[Tensor, Tensor]:
    r"""Eigenvalues :math:`\lambda` (ascending) of a symmetric ``gram`` :math:`G = V\Lambda V^\top` and
    :math:`V^\top R` for ``rhs`` :math:`R`, without returning :math:`V` (module docstring).

    Args:
        gram: ``(*batch_g, F, F)`` symmetric; only its lower triangle is read on the tridiagonal route.
        rhs: ``(*batch_r, F, k)`` right-hand sides, batch shapes broadcasting with ``batch_g``.
        method: ``"auto"`` takes the tridiagonal route (LAPACK ``dsytrd``, reflectors, ``dstevd``;
            :math:`\approx` the cost of ``eigvalsh``) for CPU float64 tensors without gradients and
            ``torch.linalg.eigh`` otherwise; ``"eigh"`` and ``"tridiagonal"`` force one (the latter needs CPU
            float64 tensors).

    Returns:
        ``(eigenvalues (*batch_g, F), projected (*batch, F, k))`` with ``batch`` the broadcast batch shape; the
        signs of the rows of ``projected`` (and their rotation within a repeated eigenvalue) are arbitrary.
    """
    if gram.dim() < 2 or gram.size(-1) != gram.size(-2):
        raise ValueError(f"gram must have shape (..., F, F), got {tuple(gram.shape)}.")
    if rhs.dim() < 2 or rhs.size(-2) != gram.size(-1):
        raise ValueError(f"rhs must have shape (..., F, k) with F = {gram.size(-1)}, got {tuple(rhs.shape)}.")
    if method not in ("auto", "eigh", "tridiagonal"):
        raise ValueError(f"method must be 'auto', 'eigh' or 'tridiagonal', got {method!r}.")
    if method == "eigh" or (method == "auto" and _use_eigh(gram, rhs)):
        eigenvalues, eigenvectors = torch.linalg.eigh(gram)
        return eigenvalues, eigenvectors.mT @ rhs
    if gram.device.type != "cpu" or rhs.device.type != "cpu" or gram.dtype != torch.float64:
        raise ValueError("method='tridiagonal' needs CPU tensors and a float64 gram.")
    rhs = rhs.to(torch.float64)

    size, num_rhs = gram.size(-1), rhs.size(-1)
    batch = torch.broadcast_shapes(gram.shape[:-2], rhs.shape[:-2])
    gram_batch = (1,) * (len(batch) - (gram.dim() - 2)) + tuple(gram.shape[:-2])
    gram_np = gram.detach().reshape(*gram_batch, size, size).numpy()
    rhs_np = rhs.detach().expand(*batch, size, num_rhs).numpy()
    eigenvalues = np.empty((*gram_batch, size))
    projected = np.empty((*batch, size, num_rhs))
    # Batch dimensions of the right-hand sides that one gram is shared over become extra columns: one
    # decomposition per gram, not per broadcast batch member.
    shared = [dim for dim, (g, b) in enumerate(zip(gram_batch, batch, strict=True)) if g == 1 and b != 1]
    for index in itertools.product(*(range(g) for g in gram_batch)):
        select = tuple(slice(None) if dim in shared else i for dim, i in enumerate(index))
        columns = np.moveaxis(rhs_np[select], -2, 0)  # (F, *shared, k)
        values, rotated = _tridiagonal_route(gram_np[index], columns.reshape(size, -1))
        eigenvalues[index] = values
        projected[select] = np.moveaxis(rotated.reshape(columns.shape), 0, -2)
    return (
        torch.from_numpy(eigenvalues).reshape(gram.shape[:-1]),
        torch.from_numpy(projected),
    )
