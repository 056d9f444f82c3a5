r"""The exact marginal likelihood of a GP with fixed features as an :math:`O(F)` function of its scale parameters.

With fixed features :math:`\Phi \in \mathbb R^{N\times F}` (fixed lengthscales), targets :math:`y`, a fixed mean
offset :math:`m_0` and the model

.. math::
    y \sim N\big(c\,\mathbf 1 + m_0,\; K\big), \qquad K = s\,\Phi\Phi^\top + \sigma^2 I,

the outputscale :math:`s`, the noise :math:`\sigma^2` and the constant :math:`c` enter the exact log marginal
likelihood only through a few sums. With the eigendecomposition :math:`G = \Phi^\top\Phi = V\Lambda V^\top`
(one :math:`O(NF^2 + F^3)` computation, in which :math:`V` itself is never formed on the CPU:
:mod:`gprf.fitting.spectral_projections`) and

.. math::
    a = V^\top\Phi^\top(y - m_0), \quad b = V^\top\Phi^\top\mathbf 1, \quad
    q = (y - m_0)^\top(y - m_0), \quad t = \mathbf 1^\top(y - m_0), \quad N,

the Woodbury identity :math:`K^{-1} = \sigma^{-2}\big(I - \Phi(\tfrac{\sigma^2}{s}I + G)^{-1}\Phi^\top\big)` and
the matrix determinant lemma give, with weights :math:`w_i = s/(\sigma^2 + s\lambda_i)`,

.. math::
    \alpha = (y - m_0)^\top K^{-1}(y - m_0) &= \sigma^{-2}\big(q - \textstyle\sum_i w_i a_i^2\big), \\
    \beta = \mathbf 1^\top K^{-1}(y - m_0) &= \sigma^{-2}\big(t - \textstyle\sum_i w_i a_i b_i\big), \\
    \gamma = \mathbf 1^\top K^{-1}\mathbf 1 &= \sigma^{-2}\big(N - \textstyle\sum_i w_i b_i^2\big), \\
    \log\det K &= N\log\sigma^2 + \textstyle\sum_i \log(1 + s\lambda_i/\sigma^2),

and :math:`\log p(y) = -\tfrac12\big(\alpha - 2c\beta + c^2\gamma + \log\det K + N\log 2\pi\big)`: each evaluation costs
:math:`O(F)`. The constant that maximises it is :math:`c^* = \beta/\gamma` (:math:`\gamma > 0` as :math:`K` is positive
definite). Fewer points than features (:math:`N < F`) need nothing special: :math:`G` then has :math:`F - N` zero
eigenvalues, whose components of :math:`a` and :math:`b` vanish; :meth:`~gprf.fitting.ScaleStatistics.from_points` takes
the same statistics from the :math:`N\times N` Gram :math:`\Phi\Phi^\top` instead, in :math:`O(N^2F + N^3)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from gprf.fitting.spectral_projections import spectral_projections
from gprf.linalg import symmetric_gram
from gprf.settings import factor_dtype

#: A function from the sums ``[G, P, q, t]`` and the row count :math:`N` of one process's rows to those of all rows.
SumsReduction = Callable[[list[Tensor], int], tuple[list[Tensor], int]]


def _check_chunk(features: object, residual: object, num_features: int | None) -> None:
    if not torch.is_tensor(features) or not features.is_floating_point() or features.dim() < 2:
        raise TypeError(
            "Each chunk's features must be a real floating-point tensor of shape (..., n, F), got "
            f"{getattr(features, 'shape', type(features).__name__)}."
        )
    if num_features is not None and features.size(-1) != num_features:
        raise ValueError(f"A chunk has {features.size(-1)} features, earlier chunks {num_features}: F must not change.")
    if not torch.is_tensor(residual) or residual.dim() < 1 or residual.size(-1) != features.size(-2):
        raise ValueError(
            f"Each chunk's residual y - m0 must have shape (..., n) with n = {features.size(-2)} rows as its "
            f"features, got {tuple(getattr(residual, 'shape', ()))}."
        )


def _residual_and_ones(residual: Tensor) -> Tensor:
    """``[y - m0, 1]`` as the two columns ``(..., N, 2)`` of one right-hand side: one GEMM for both projections."""
    return torch.stack(torch.broadcast_tensors(residual, torch.ones_like(residual)), dim=-1)


@dataclass(frozen=True)
class FeatureSums:
    r"""The sums over the rows behind :class:`ScaleStatistics`, before the eigendecomposition.

    :math:`G = \Phi^\top\Phi`, :math:`P = \Phi^\top[\,y - m_0,\ \mathbf 1\,]`, :math:`q, t, N` in the factor dtype
    (:class:`gprf.settings.factor_dtype`). They do not depend on the outputscale, the noise or the constant mean, so
    the same sums give the marginal likelihood (:meth:`ScaleStatistics.from_sums`) and, once those are fitted, the
    prediction cache (the capacitance :math:`I + (s/\sigma^2)G`): :func:`gprf.fit_mll` forms :math:`G` once for both.

    Attributes:
        gram: :math:`G` ``(*batch, F, F)``.
        projections: :math:`P` ``(*batch, F, 2)``: :math:`\Phi^\top(y - m_0)` and :math:`\Phi^\top\mathbf 1`.
        residual_square: :math:`q = (y - m_0)^\top(y - m_0)` ``(*batch)``.
        residual_sum: :math:`t = \mathbf 1^\top(y - m_0)` ``(*batch)``.
        num_data: :math:`N`.
    """

    gram: Tensor
    projections: Tensor
    residual_square: Tensor
    residual_sum: Tensor
    num_data: int

    @classmethod
    def from_chunks(cls, chunks: Iterable[tuple[Tensor, Tensor]], reduce: SumsReduction | None = None) -> FeatureSums:
        r"""Accumulate the sums over row chunks ``(features (..., n, F), residual y - m0 (..., n))``.

        ``reduce``: ``None``, or a function that takes the sums ``[G, P, q, t]`` of these chunks and their :math:`N`
        and returns those of all the rows: rows sharded over processes (:mod:`gprf.distributed` sums them over the
        ranks; there a rank without rows passes one empty chunk, which tells the sums' shapes).

        Each chunk is cast to the factor dtype and dropped after its sums are added, so no more than one chunk of
        :math:`\Phi` is held; the cost is :math:`O(NF^2)`. Raises ``ValueError`` for no rows, chunks of different
        widths or non-finite sums.
        """
        dtype = factor_dtype.value()
        gram = projections = residual_square = residual_sum = None
        num_data = 0
        for features, residual in chunks:
            _check_chunk(features, residual, None if gram is None else gram.size(-1))
            phi = features.to(dtype)
            residual = residual.to(dtype)
            rhs = _residual_and_ones(residual)
            chunk_gram, chunk_projections = symmetric_gram(phi), phi.mT @ rhs
            chunk_square, chunk_sum = residual.square().sum(-1), residual.sum(-1)
            if gram is None:
                gram, projections, residual_square, residual_sum = (
                    chunk_gram,
                    chunk_projections,
                    chunk_square,
                    chunk_sum,
                )
            else:
                gram = gram + chunk_gram
                projections = projections + chunk_projections
                residual_square = residual_square + chunk_square
                residual_sum = residual_sum + chunk_sum
            num_data += features.size(-2)
        if reduce is not None and gram is not None:
            (gram, projections, residual_square, residual_sum), num_data = reduce(
                [gram, projections, residual_square, residual_sum], num_data
            )
        if gram is None or num_data == 0:
            raise ValueError("FeatureSums.from_chunks got no rows; pass at least one non-empty chunk.")
        if not bool(torch.isfinite(gram).all() & torch.isfinite(projections).all()):
            raise ValueError("The features or the residuals y - m0 contain NaN or infinite values.")
        return cls(gram, projections, residual_square, residual_sum, num_data)


@dataclass(frozen=True)
class ScaleStatistics:
    r"""The sums :math:`\lambda, a, b, q, t, N` behind the :math:`O(F)` marginal likelihood (module docstring).

    Build them with :meth:`from_chunks` (or :meth:`from_sums`). Batch shapes broadcast: ``eigenvalues`` has the batch
    shape of the features, ``residual_projection``, ``ones_projection`` and the scalars that of the features and
    residuals together (BoTorch multi-output models: ``(m, F)`` and ``(m,)``). All are in the factor dtype
    (:class:`gprf.settings.factor_dtype`, float64 by default).

    Attributes:
        eigenvalues: :math:`\lambda` ``(*batch, F)``, the eigenvalues of :math:`\Phi^\top\Phi` (clamped at 0);
            ``(*batch, N)`` from :meth:`from_points`, those of :math:`\Phi\Phi^\top`.
        residual_projection: :math:`a = V^\top\Phi^\top(y - m_0)` ``(*batch, F)``.
        ones_projection: :math:`b = V^\top\Phi^\top\mathbf 1` ``(*batch, F)``.
        residual_square: :math:`q = (y - m_0)^\top(y - m_0)` ``(*batch)``.
        residual_sum: :math:`t = \mathbf 1^\top(y - m_0)` ``(*batch)``.
        num_data: :math:`N`.
    """

    eigenvalues: Tensor
    residual_projection: Tensor
    ones_projection: Tensor
    residual_square: Tensor
    residual_sum: Tensor
    num_data: int

    @classmethod
    def from_chunks(
        cls,
        chunks: Iterable[tuple[Tensor, Tensor]],
        method: Literal["auto", "eigh", "tridiagonal"] = "auto",
        reduce: SumsReduction | None = None,
    ) -> ScaleStatistics:
        r"""Accumulate :math:`\Phi^\top\Phi`, :math:`\Phi^\top(y - m_0)`, :math:`\Phi^\top\mathbf 1`, :math:`q, t, N`
        over row chunks ``(features (..., n, F), residual y - m0 (..., n))`` (:meth:`FeatureSums.from_chunks`, which
        also takes ``reduce``), then eigendecompose (:meth:`from_sums`). Raises ``ValueError`` for no rows, chunks of
        different widths or non-finite sums.
        """
        return cls.from_sums(FeatureSums.from_chunks(chunks, reduce=reduce), method=method)

    @classmethod
    def from_sums(cls, sums: FeatureSums, method: Literal["auto", "eigh", "tridiagonal"] = "auto") -> ScaleStatistics:
        r""":math:`\lambda, a, b` from the sums in :math:`O(F^3)`, :math:`G` left unchanged
        (:func:`gprf.fitting.spectral_projections.spectral_projections`: on the CPU in float64 a tridiagonalisation
        without eigenvectors of :math:`G`, about the cost of ``eigvalsh``; ``torch.linalg.eigh`` otherwise or with
        ``method="eigh"``)."""
        eigenvalues, rotated = spectral_projections(sums.gram, sums.projections, method=method)
        return cls(
            # Rounding can leave eigenvalues of a positive semi-definite Gram slightly negative.
            eigenvalues=eigenvalues.clamp_min(0),
            residual_projection=rotated[..., 0],
            ones_projection=rotated[..., 1],
            residual_square=sums.residual_square,
            residual_sum=sums.residual_sum,
            num_data=sums.num_data,
        )

    @classmethod
    def from_points(
        cls, features: Tensor, residual: Tensor, method: Literal["auto", "eigh", "tridiagonal"] = "auto"
    ) -> ScaleStatistics:
        r"""The statistics from the :math:`N\times N` Gram :math:`\Phi\Phi^\top = U\Lambda U^\top` instead of
        :math:`\Phi^\top\Phi`, in :math:`O(N^2F + N^3)`: the cheaper route for fewer points than features.

        With the thin SVD :math:`\Phi = U S V^\top`, both Grams have the nonzero eigenvalues :math:`\lambda = S^2`, and
        :math:`V^\top\Phi^\top r = S\,U^\top r`: so :math:`a = \sqrt\lambda \odot U^\top(y - m_0)` and
        :math:`b = \sqrt\lambda \odot U^\top\mathbf 1`, with :math:`N` entries instead of :math:`F` (the
        :math:`F - N` zero eigenvalues of :math:`\Phi^\top\Phi` add nothing to any sum of the module docstring).

        Args:
            features: :math:`\Phi` ``(*batch, N, F)``, every row at once.
            residual: :math:`y - m_0` ``(*batch, N)``.
            method: As :meth:`from_sums`.
        """
        _check_chunk(features, residual, None)
        dtype = factor_dtype.value()
        phi, residual = features.to(dtype), residual.to(dtype)
        rhs = _residual_and_ones(residual)
        gram = symmetric_gram(phi.mT)
        if not bool(torch.isfinite(gram).all() & torch.isfinite(rhs).all()):
            raise ValueError("The features or the residuals y - m0 contain NaN or infinite values.")
        eigenvalues, rotated = spectral_projections(gram, rhs, method=method)
        eigenvalues = eigenvalues.clamp_min(0)  # rounding can leave them slightly negative
        scaled = eigenvalues.sqrt().unsqueeze(-1) * rotated
        return cls(
            eigenvalues=eigenvalues,
            residual_projection=scaled[..., 0],
            ones_projection=scaled[..., 1],
            residual_square=residual.square().sum(-1),
            residual_sum=residual.sum(-1),
            num_data=features.size(-2),
        )

    @property
    def num_features(self) -> int:
        return self.eigenvalues.size(-1)

    @property
    def batch_shape(self) -> torch.Size:
        return torch.broadcast_shapes(
            self.eigenvalues.shape[:-1], self.residual_projection.shape[:-1], self.residual_square.shape
        )

    def inverse_quadratic_forms(self, outputscale: Tensor, noise: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        r""":math:`(\alpha, \beta, \gamma) = \big((y - m_0)^\top K^{-1}(y - m_0),\ \mathbf 1^\top K^{-1}(y - m_0),\
        \mathbf 1^\top K^{-1}\mathbf 1\big)` at outputscale :math:`s` and noise :math:`\sigma^2` (``(*batch)``
        each), :math:`O(F)`."""
        outputscale, noise = outputscale.unsqueeze(-1), noise.unsqueeze(-1)
        weights = outputscale / (noise + outputscale * self.eigenvalues)
        a, b = self.residual_projection, self.ones_projection
        alpha = (self.residual_square - (weights * a.square()).sum(-1)) / noise.squeeze(-1)
        beta = (self.residual_sum - (weights * a * b).sum(-1)) / noise.squeeze(-1)
        gamma = (self.num_data - (weights * b.square()).sum(-1)) / noise.squeeze(-1)
        return alpha, beta, gamma

    def log_det(self, outputscale: Tensor, noise: Tensor) -> Tensor:
        r""":math:`\log\det K = N\log\sigma^2 + \sum_i\log(1 + s\lambda_i/\sigma^2)`, :math:`O(F)`."""
        ratio = (outputscale / noise).unsqueeze(-1)
        return self.num_data * noise.log() + torch.log1p(ratio * self.eigenvalues).sum(-1)

    def optimal_constant(self, outputscale: Tensor, noise: Tensor) -> Tensor:
        r"""The constant mean :math:`c^* = \beta/\gamma` that maximises the marginal likelihood at :math:`s,
        \sigma^2` (the generalised least-squares mean), ``(*batch)``."""
        _, beta, gamma = self.inverse_quadratic_forms(outputscale, noise)
        return beta / gamma

    def log_marginal_likelihood(self, outputscale: Tensor, noise: Tensor, constant: Tensor | float = 0.0) -> Tensor:
        r"""The exact :math:`\log p(y)/N` at outputscale :math:`s`, noise :math:`\sigma^2` and constant mean
        :math:`c` (tensors broadcasting to the batch shape), ``(*batch)``, in :math:`O(F)`.

        Divided by :math:`N` as GPyTorch's ``ExactMarginalLogLikelihood`` reports it (which adds the log priors
        of the model's parameters before dividing; :func:`gprf.fitting.fit_scale_hyperparameters` adds those of
        :math:`s`, :math:`\sigma^2` and :math:`c`). Differentiable in all three.
        """
        dtype = self.eigenvalues.dtype
        outputscale, noise = torch.as_tensor(outputscale, dtype=dtype), torch.as_tensor(noise, dtype=dtype)
        constant = torch.as_tensor(constant, dtype=dtype, device=self.eigenvalues.device)
        alpha, beta, gamma = self.inverse_quadratic_forms(outputscale, noise)
        inv_quad = alpha - 2 * constant * beta + constant.square() * gamma
        log_det = self.log_det(outputscale, noise)
        return -0.5 * (inv_quad + log_det + self.num_data * math.log(2 * math.pi)) / self.num_data
