r"""A randomized Nyström preconditioner for the capacitance :math:`C = I + G` (:math:`G` positive semi-definite).

With a rank-:math:`r` Nyström approximation :math:`\hat G = U\Lambda U^\top \preceq G` (Frangella, Tropp and Udell,
2023), the preconditioner is the capacitance of the approximation, :math:`P = I + \hat G`. With
:math:`E = G - \hat G \succeq 0`,

.. math::
    P^{-1/2} C P^{-1/2} = I + P^{-1/2} E P^{-1/2}, \qquad 1 \le \lambda(P^{-1/2} C P^{-1/2}) \le 1 + \lVert E\rVert,

so conjugate gradients converge at a rate set by the part of the spectrum of :math:`G` that the sketch missed
(about :math:`\lambda_{r+1}(G)`) instead of by :math:`\lambda_1(G)`. Every power of :math:`P` is one
:math:`F\times r` product, :math:`P^{p} = I + U\left((I + \Lambda)^{p} - I\right)U^\top`, and
:math:`\log\det P = \sum_i \log(1 + \lambda_i)`.

Reference: Frangella, Z., Tropp, J. A. and Udell, M. (2023). Randomized Nyström preconditioning. *SIAM Journal on
Matrix Analysis and Applications* 44(2), 718–752.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class NystromPreconditioner:
    r""":math:`P = I + U\Lambda U^\top` with orthonormal ``basis`` :math:`U` ``(*batch, F, r)`` and ``eigenvalues``
    :math:`\Lambda \ge 0` ``(*batch, r)``; rank 0 is the identity (no preconditioning)."""

    basis: Tensor
    eigenvalues: Tensor

    @classmethod
    def from_gram(cls, gram: Tensor, rank: int, generator: torch.Generator | None = None) -> NystromPreconditioner:
        r"""Sketch the positive semi-definite ``gram`` ``(*batch, F, F)`` with ``rank`` Gaussian test vectors.

        The stable Nyström approximation (Frangella et al., 2023, Algorithm 2.1): with an orthonormal test matrix
        :math:`\Omega`, a tiny shift :math:`\nu` (so that :math:`\Omega^\top(G + \nu I)\Omega` has a Cholesky factor
        :math:`L` in floating point), :math:`Y_\nu = (G + \nu I)\Omega`, :math:`B = Y_\nu L^{-\top} = U\Sigma V^\top`,
        one has :math:`\hat G = U\max(\Sigma^2 - \nu I, 0)U^\top`. Cost :math:`2F^2r + O(Fr^2)`. ``rank`` is capped
        at :math:`F` (where the approximation is exact).
        """
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ValueError(f"rank must be a non-negative integer (0: no preconditioner), got {rank!r}.")
        num_features = gram.size(-1)
        rank = min(rank, num_features)
        batch_shape = gram.shape[:-2]
        if rank == 0:
            return cls(gram.new_zeros(*batch_shape, num_features, 0), gram.new_zeros(*batch_shape, 0))
        device = generator.device if generator is not None else gram.device
        test = torch.randn(*batch_shape, num_features, rank, generator=generator, device=device, dtype=gram.dtype)
        test = torch.linalg.qr(test.to(gram.device)).Q
        sketch = gram @ test
        # nu = sqrt(F) eps ||Y||: the smallest shift that keeps the core Cholesky factorisable in floating point.
        norm = torch.linalg.matrix_norm(sketch).unsqueeze(-1).unsqueeze(-1)
        shift = num_features**0.5 * torch.finfo(gram.dtype).eps * norm
        sketch = sketch + shift * test
        core = test.mT @ sketch
        core_cholesky = torch.linalg.cholesky((core + core.mT) / 2)
        whitened = torch.linalg.solve_triangular(core_cholesky, sketch.mT, upper=False).mT
        basis, singular_values, _ = torch.linalg.svd(whitened, full_matrices=False)
        eigenvalues = (singular_values.square() - shift.squeeze(-1)).clamp_min(0)
        return cls(basis, eigenvalues)

    @property
    def rank(self) -> int:
        return self.eigenvalues.size(-1)

    def power_matmul(self, rhs: Tensor, power: float) -> Tensor:
        r""":math:`P^{p}\,\text{rhs}` for ``rhs`` ``(*batch, F, k)``: :math:`\text{rhs} + U((1+\Lambda)^p - 1)U^\top
        \text{rhs}`."""
        if self.rank == 0:
            return rhs
        scale = self.eigenvalues.log1p().mul(power).expm1().unsqueeze(-1)
        return rhs + self.basis @ (scale * (self.basis.mT @ rhs))

    def solve(self, rhs: Tensor) -> Tensor:
        r""":math:`P^{-1}\,\text{rhs}`."""
        return self.power_matmul(rhs, -1.0)

    def dense_inverse(self) -> Tensor:
        r""":math:`P^{-1}` as a dense ``(*batch, F, F)`` matrix (:math:`O(F^2r)`)."""
        eye = torch.eye(self.basis.size(-2), dtype=self.basis.dtype, device=self.basis.device)
        return self.solve(eye.expand(*self.basis.shape[:-2], -1, -1))

    def logdet(self) -> Tensor:
        r""":math:`\log\det P = \sum_i \log(1 + \lambda_i)`, shape ``(*batch)``."""
        return self.eigenvalues.log1p().sum(-1)
