r"""Factored capacitance matrix :math:`C = I + R^H\Sigma^{-1}R` with cheap low-rank updates."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from gprf.operators.weighted_gram import weighted_gram


def solve_triangular(matrix: Tensor, rhs: Tensor, upper: bool) -> Tensor:
    """``torch.linalg.solve_triangular`` that folds ``rhs``'s extra leading batch dimensions into columns.

    With a factor of batch shape ``B`` and right-hand sides of batch shape ``(*A, *B)`` (e.g. an acquisition
    optimiser's restarts), torch would expand the factor to ``(*A, *B, F, F)``, a copy per batch member;
    folding ``A`` into the columns solves the same system with one factor.
    """
    extra = rhs.dim() - matrix.dim()
    if extra <= 0:
        return torch.linalg.solve_triangular(matrix, rhs, upper=upper)
    leading = tuple(range(extra))
    moved = rhs.movedim(leading, tuple(range(-extra, 0)))  # (*B, F, k, *A)
    folded = moved.reshape(*moved.shape[: -extra - 1], -1)
    solved = torch.linalg.solve_triangular(matrix, folded, upper=upper)
    solved = solved.reshape(*solved.shape[:-1], *moved.shape[-extra - 1 :])
    return solved.movedim(tuple(range(-extra, 0)), leading)


@dataclass(frozen=True)
class CapacitanceFactor:
    r"""A root :math:`G` of the :math:`F\times F` capacitance :math:`C = GG^H`, kept in float64 or complex128.

    Real symmetric and complex Hermitian capacitances are handled alike (``^H`` is the transpose for real
    tensors); complex ones arise from complex feature maps (:class:`~gprf.prediction.ComplexFeaturePredictionStrategy`).

    :math:`G = L S_1 \cdots S_k` with :math:`L` the Cholesky factor of the initial capacitance and one
    factor :math:`S_j = I + Q_j(T_j - I)Q_j^H` per low-rank update :math:`C \leftarrow C + UU^H`:
    with :math:`V = G^{-1}U = Q_j R_j` (thin QR) and :math:`T_j T_j^H = I + R_jR_j^H` one checks
    :math:`S_jS_j^H = I + VV^H`, so :math:`G S_j (G S_j)^H = C + UU^H`, and
    :math:`S_j^{-1} = I + Q_j(T_j^{-1} - I)Q_j^H`. An update with ``m`` columns costs
    :math:`O(F^2 m + F m^2)`; nothing of size :math:`N` or :math:`F^3` is recomputed.
    """

    cholesky: Tensor
    updates: tuple[tuple[Tensor, Tensor], ...] = field(default=())

    @classmethod
    def from_gram(cls, gram: Tensor) -> CapacitanceFactor:
        """Factor :math:`I + \\text{gram}` (Hermitian); the identity makes it positive definite."""
        eye = torch.eye(gram.size(-1), dtype=gram.dtype, device=gram.device)
        chol, info = torch.linalg.cholesky_ex(gram + eye)
        if info.any():  # one sync per factorisation, never per forward pass
            raise ValueError(
                "The feature-space capacitance I + R^T Sigma^-1 R is not positive definite: the features or "
                "the noise contain NaN/inf (check the inputs and that the likelihood noise is positive)."
            )
        return cls(chol)

    @classmethod
    def from_features(cls, phi: Tensor, noise: Tensor) -> CapacitanceFactor:
        r"""Factor :math:`I + \Phi^H\mathrm{diag}(\sigma^2)^{-1}\Phi` for features ``(..., N, F)``, noise ``(..., N)``.

        Real features go through :func:`~gprf.operators.weighted_gram.weighted_gram` (upper block triangle
        only, 5/8 of the GEMM at F = 512); complex ones through one Hermitian product.
        """
        if phi.is_complex():
            return cls.from_gram((phi / noise.unsqueeze(-1)).mH @ phi)
        return cls.from_gram(weighted_gram(phi, noise))

    def solve_root(self, rhs: Tensor) -> Tensor:
        """:math:`G^{-1}\\,\\text{rhs}` for ``rhs`` of shape ``(..., F, k)``."""
        z = solve_triangular(self.cholesky, rhs, upper=False)
        for q, t in self.updates:
            qz = q.mH @ z
            z = z + q @ (solve_triangular(t, qz, upper=False) - qz)
        return z

    def solve_root_transpose(self, rhs: Tensor) -> Tensor:
        """:math:`G^{-H}\\,\\text{rhs}`."""
        z = rhs
        for q, t in reversed(self.updates):
            qz = q.mH @ z
            z = z + q @ (solve_triangular(t.mH, qz, upper=True) - qz)
        return solve_triangular(self.cholesky.mH, z, upper=True)

    def solve(self, rhs: Tensor) -> Tensor:
        """:math:`C^{-1}\\,\\text{rhs}`."""
        return self.solve_root_transpose(self.solve_root(rhs))

    def logdet(self) -> Tensor:
        """:math:`\\log\\det C`."""
        total = 2 * self.cholesky.diagonal(dim1=-2, dim2=-1).real.log().sum(-1)
        for _, t in self.updates:
            total = total + 2 * t.diagonal(dim1=-2, dim2=-1).real.log().sum(-1)
        return total

    def update(self, columns: Tensor) -> CapacitanceFactor:
        """The factor of :math:`C + UU^H` for ``columns`` :math:`U` of shape ``(..., F, m)``."""
        v = self.solve_root(columns)
        q, r = torch.linalg.qr(v)
        eye = torch.eye(r.size(-2), dtype=r.dtype, device=r.device)
        t = torch.linalg.cholesky(eye + r @ r.mH)
        return CapacitanceFactor(self.cholesky, (*self.updates, (q, t)))
