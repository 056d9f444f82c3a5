r"""The one home of gprf's factorisations: the capacitance :math:`C = I + s\,\Phi^H\Sigma^{-1}\Phi`.

Every consumer of a feature root — the marginal likelihood, the prediction strategies, fantasies, streaming
and BoTorch's pathwise update — forms and factors :math:`C` here, in the dtype of
:class:`gprf.settings.factor_dtype` (float64 by default, whatever the model dtype), and every factorisation
checks its training data once: when the factor or the projection is not finite, the rows responsible are
counted and reported (:class:`~gprf.exceptions.NonFiniteTrainingDataError`) instead of returning NaN.
That check costs no extra host synchronisation: it shares the one read of the Cholesky status that any
factorisation needs to decide whether it succeeded. Roots in a lower precision than the factor dtype (float32
models) get their Gram's products in the factor dtype too, unless its rounding is known, before forming it, to be
negligible (:func:`lower_precision_gram_error`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from gprf.exceptions import NonFiniteTrainingDataError
from gprf.linalg.chunked_gram import chunked_gram_projection
from gprf.linalg.lazy_features import LazyFeatures
from gprf.linalg.weighted_gram import weighted_gram, weighted_gram_projection
from gprf.settings import factor_dtype, feature_chunk_size

#: Measured constant :math:`c` of the error estimate :math:`c\,u\max_j G_{jj}` of a Gram formed with
#: lower-precision products (:func:`lower_precision_gram_error`).
GRAM_ERROR_CONSTANT = 2.0
#: The largest estimated relative error of the predictions that lower-precision Gram products may bring, a quarter
#: of the 1e-6 that float32 models keep against float64 arithmetic (the rest is left to the float32 roots and
#: outputs).
GRAM_ERROR_TOLERANCE = 2.5e-7
#: Unit roundoff of float32 matrix products under ``torch.get_float32_matmul_precision()``: IEEE float32, TF32's
#: 10-bit mantissa ("high"), bfloat16's 7 bits ("medium").
_FLOAT32_MATMUL_UNIT_ROUNDOFF = {"highest": 2.0**-24, "high": 2.0**-11, "medium": 2.0**-8}


def fold_leading_batch(fn: Callable[[Tensor, Tensor], Tensor], matrix: Tensor, rhs: Tensor) -> Tensor:
    """``fn(matrix, rhs)`` for a linear ``fn`` of the columns of ``rhs`` (a solve or a product), with ``rhs``'s extra
    leading batch dimensions folded into columns.

    With a matrix of batch shape ``B`` and right-hand sides of batch shape ``(*A, *B)`` (e.g. an acquisition
    optimiser's restarts), torch would expand the matrix to ``(*A, *B, ...)``, a copy per batch member; folding ``A``
    into the columns computes the same result with one matrix.
    """
    extra = rhs.dim() - matrix.dim()
    if extra <= 0:
        return fn(matrix, rhs)
    leading = tuple(range(extra))
    moved = rhs.movedim(leading, tuple(range(-extra, 0)))  # (*B, F, k, *A)
    folded = moved.reshape(*moved.shape[: -extra - 1], -1)
    result = fn(matrix, folded)
    result = result.reshape(*result.shape[:-1], *moved.shape[-extra - 1 :])
    return result.movedim(tuple(range(-extra, 0)), leading)


def solve_triangular(matrix: Tensor, rhs: Tensor, upper: bool) -> Tensor:
    """``torch.linalg.solve_triangular`` with one factor for right-hand sides of more batch dimensions
    (:func:`fold_leading_batch`)."""
    return fold_leading_batch(lambda m, r: torch.linalg.solve_triangular(m, r, upper=upper), matrix, rhs)


def nonfinite_rows(features: Tensor | LazyFeatures, noise: Tensor | None = None, rhs: Tensor | None = None) -> Tensor:
    """Mask ``(..., N)`` of the training rows that make a factorisation non-finite.

    A row is bad when its ``features`` ``(..., N, F)`` (a lazy root is evaluated chunk by chunk) or right-hand sides
    ``rhs`` ``(..., N, k)`` hold NaN or inf, or its noise variance (``noise`` ``(..., N)``, or ``(..., 1)`` for one
    per batch member) is not positive and finite.
    """
    if isinstance(features, LazyFeatures):
        masks = [features.nonfinite_rows()]
    else:
        masks = [~torch.isfinite(features).all(-1)]
    if noise is not None:
        masks.append(~(torch.isfinite(noise) & (noise > 0)))
    if rhs is not None:
        masks.append(~torch.isfinite(rhs).all(-1))
    return torch.stack(torch.broadcast_tensors(*masks)).any(0)


def checked_cholesky(matrix: Tensor, diagnose: Callable[[], None], also_finite: Tensor | None = None) -> Tensor:
    r"""Lower Cholesky factor of the Hermitian ``matrix`` (already in the factor dtype), checked once.

    When the factorisation fails, or ``also_finite`` (e.g. the projection of the targets) holds NaN or inf,
    ``diagnose()`` is called: it raises :class:`~gprf.exceptions.NonFiniteTrainingDataError` when the data are to
    blame (see :func:`raise_for_nonfinite_rows`). A finite matrix that is not numerically positive definite gets
    GPyTorch's treatment instead: ``psd_safe_cholesky`` adds jitter (with a ``NumericalWarning``) and raises
    ``NotPSDError`` when that does not help.
    """
    cholesky, failed = cholesky_status(matrix, also_finite)
    if failed:
        diagnose()
        cholesky = psd_safe_cholesky(matrix)
    return cholesky


def cholesky_status(matrix: Tensor, also_finite: Tensor | None = None) -> tuple[Tensor, bool]:
    """``torch.linalg.cholesky_ex`` of ``matrix`` and whether it failed or ``also_finite`` is not finite — the one
    host synchronisation of a factorisation."""
    cholesky, info = torch.linalg.cholesky_ex(matrix)
    # NaN or inf anywhere makes the sum non-finite: one reduction each, few kernels at small sizes (a sum that
    # overflows without either only costs the checked fallback).
    total = cholesky.diagonal(dim1=-2, dim2=-1).sum()
    if also_finite is not None:
        total = total + also_finite.sum()
    return cholesky, bool(info.any() | ~torch.isfinite(total))


def matmul_unit_roundoff(dtype: torch.dtype) -> float:
    """The unit roundoff of matrix products in ``dtype`` (float32: as ``torch.get_float32_matmul_precision()``
    allows, e.g. TF32)."""
    if dtype == torch.float32:
        return _FLOAT32_MATMUL_UNIT_ROUNDOFF[torch.get_float32_matmul_precision()]
    return torch.finfo(dtype).eps / 2


def lower_precision_gram_error(
    features: Tensor | LazyFeatures, noise: Tensor, outputscale: Tensor | None
) -> float | None:
    r"""Estimated relative error of the predictions from :math:`G = s\,R^\top\Sigma^{-1}R` formed with products in
    the features' dtype, or ``None`` when it cannot be known before forming :math:`G` for free.

    With :math:`A = \sqrt s\,\Sigma^{-1/2}R`, a Gram formed with unit roundoff :math:`u` is :math:`G + E`. Each
    entry is a sum of :math:`N` products and :math:`|E_{jk}| \le \gamma\sum_i|a_{ij}||a_{ik}| \le
    \gamma\sqrt{G_{jj}G_{kk}}` (Cauchy–Schwarz; Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
    SIAM 2002, §3.5), with :math:`\gamma \le Nu` in the worst case and about :math:`u` for the short accumulation
    runs of blocked GEMMs. The weights :math:`C^{-1}P` and the predictive variances :math:`\phi^\top C^{-1}\phi`
    of :math:`C = I + G` move relatively by at most :math:`\lVert C^{-1/2}EC^{-1/2}\rVert \le \lVert
    E\rVert/\lambda_{\min}(C) \le \lVert E\rVert` (every eigenvalue of :math:`C` is at least 1, so the
    condition number :math:`1 + \lVert G\rVert` of the capacitance adds nothing beyond the scale of :math:`E`).
    The deterministic bound :math:`\lVert E\rVert \le \gamma\,\mathrm{tr}\,G` is far from what happens: the
    off-diagonal errors, of either sign, largely cancel in the norm, and what remains was measured at the size of
    the diagonal part, :math:`u\max_j G_{jj}`. The estimate is
    :math:`c\,u\max_j G_{jj}` with :math:`c` = :data:`GRAM_ERROR_CONSTANT` (2): float32 products (MKL SGEMM) of
    random Fourier roots gave relative errors of the predictive mean and variance of at most
    :math:`1.5\,u\max_j G_{jj}` over 189 cases (:math:`N` 300–8000, :math:`F` 64–1024, lengthscales 0.1–1, noise
    :math:`10^{-6}`–1). Against :data:`GRAM_ERROR_TOLERANCE` (:math:`2.5\cdot 10^{-7}`) this keeps float32 products
    only while :math:`\max_j G_{jj} \lesssim 2`, i.e. at signal-to-noise ratios per feature of order one.

    :math:`G_{jj} = s\sum_i r_{ij}^2/\sigma_i^2` is bounded by :math:`s\lVert r_{:j}\rVert^2/\min_i\sigma_i^2`
    (exact for one noise variance), an :math:`O(NF)` reduction with no :math:`N\times F` temporary; a CPU tensor is
    read without synchronising with any device. On a GPU the read would cost a host synchronisation (and lazy roots
    a second featurisation), so there it is not made: ``None``.
    """
    if isinstance(features, LazyFeatures) or features.device.type != "cpu" or features.is_complex():
        return None
    column_squares = torch.linalg.vector_norm(features, dim=-2, dtype=torch.float64).square().amax(-1)
    smallest_noise = noise.to(torch.float64).amin(-1)
    # A noise variance that is not positive (or NaN) has no rounding bound: infinite, so the exact route reports it.
    scale = torch.where(smallest_noise > 0, 1 / smallest_noise, math.inf)
    if outputscale is not None:
        scale = scale * outputscale.to(torch.float64)
    largest_diagonal = (column_squares * scale).max().detach()  # a decision, not a differentiable value
    return GRAM_ERROR_CONSTANT * matmul_unit_roundoff(features.dtype) * float(largest_diagonal)


def products_in_factor_dtype(features: Tensor | LazyFeatures, noise: Tensor, outputscale: Tensor | None) -> bool:
    """Whether the Gram of ``features`` needs its products in the factor dtype: the features are less precise and
    the rounding of their own products is not known to stay within :data:`GRAM_ERROR_TOLERANCE`."""
    if matmul_unit_roundoff(features.dtype) <= torch.finfo(factor_dtype.value()).eps / 2:
        return False
    error = lower_precision_gram_error(features, noise, outputscale)
    return error is None or not error <= GRAM_ERROR_TOLERANCE  # NaN (e.g. an all-zero column at a bad noise) too


def raise_for_nonfinite_rows(bad_rows: Tensor) -> None:
    """Raise :class:`~gprf.exceptions.NonFiniteTrainingDataError` when ``bad_rows`` ``(..., N)`` flags any row."""
    flagged = bad_rows.reshape(-1, bad_rows.size(-1)).any(0)
    count = int(flagged.sum())
    if count:
        raise NonFiniteTrainingDataError(
            f"{count} of {flagged.numel()} training points have NaN or infinite inputs, targets or features, or a "
            "noise variance that is not positive and finite; remove or impute those points (the marginal "
            "likelihood and every prediction would be NaN)."
        )


@dataclass(frozen=True)
class CapacitanceFactor:
    r"""A root :math:`G` of the :math:`F\times F` capacitance :math:`C = GG^H`, in the factor dtype.

    Real symmetric and complex Hermitian capacitances are handled alike (``^H`` is the transpose for real
    tensors); complex ones arise from complex feature maps
    (:class:`~gprf.prediction.ComplexFeaturePredictionStrategy`).

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
        """Factor :math:`I + \\text{gram}` (Hermitian, in the factor dtype); the identity makes it positive definite.

        For Gram matrices summed elsewhere (streamed statistics), whose data rows are gone: a non-finite Gram is
        reported as such.
        """

        def diagnose() -> None:
            if not bool(torch.isfinite(gram).all()):
                raise NonFiniteTrainingDataError(
                    "The Gram matrix R^T Sigma^-1 R holds NaN or infinite values: some data had NaN or infinite "
                    "inputs or targets, or a noise variance that is not positive; remove or impute those points."
                )

        eye = torch.eye(gram.size(-1), dtype=gram.dtype, device=gram.device)
        return cls(checked_cholesky(gram + eye, diagnose))

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


def weighted_sums(
    features: Tensor | LazyFeatures,
    noise: Tensor,
    rhs: Tensor | None = None,
    outputscale: Tensor | None = None,
    *,
    exact_products: bool = False,
) -> tuple[Tensor, Tensor | None]:
    r""":math:`(s\,\Phi^H\Sigma^{-1}\Phi,\; \sqrt s\,\Phi^H\Sigma^{-1}Y)` with the Gram in the factor dtype.

    ``features`` :math:`\Phi` ``(..., N, F)`` (real or complex, or a real :class:`~gprf.linalg.LazyFeatures`),
    ``noise`` the variances ``(..., N)`` or one per batch member ``(..., 1)``, ``rhs`` :math:`Y` ``(..., N, k)``,
    ``outputscale`` :math:`s` ``(...)`` (a ``ScaleKernel`` amplitude kept apart from the root). The amplitude enters
    through :math:`\Sigma/s` and :math:`Y/\sqrt s`, so no scaled copy of :math:`\Phi` is made. The Gram is formed with
    products in the factor dtype when ``exact_products`` (row chunks cast one at a time, so no :math:`N\times F` copy;
    :func:`factor_capacitance` decides by :func:`~gprf.linalg.capacitance.products_in_factor_dtype`), else in the
    features' dtype (float32 models: one float32 GEMM, :func:`~gprf.linalg.weighted_gram`) and cast; the projection is
    formed in the factor dtype, because the two inverse-quadratic terms it enters nearly
    cancel at small noise. Real features in the factor dtype take the fused Gram-and-projection autograd node; a
    lazy root is summed over row chunks (:func:`~gprf.linalg.chunked_gram.chunked_gram_projection`).
    """
    dtype = factor_dtype.value()
    if outputscale is not None:
        noise = noise / outputscale.unsqueeze(-1)
        if rhs is not None:
            rhs = rhs / outputscale.sqrt().unsqueeze(-1).unsqueeze(-1)
    if isinstance(features, LazyFeatures):
        return features.weighted_sums(noise, rhs, dtype if exact_products else features.dtype, dtype)
    if features.is_complex():
        weighted = features / noise.unsqueeze(-1)
        gram = weighted.mH @ features
        return gram, None if rhs is None else weighted.mH @ rhs.to(weighted.dtype)
    if rhs is not None and features.dtype == dtype:
        return weighted_gram_projection(features, noise.to(dtype), rhs.to(dtype))
    if exact_products and features.dtype != dtype:
        chunk_size = feature_chunk_size.chunk_rows(features.size(-1))
        return chunked_gram_projection(
            features, None, noise, rhs, chunk_size=chunk_size, product_dtype=dtype, accumulate_dtype=dtype
        )
    gram = weighted_gram(features, noise).to(dtype)
    if rhs is None:
        return gram, None
    return gram, features.to(dtype).mT @ (rhs.to(dtype) / noise.to(dtype).unsqueeze(-1))


def capacitance_sums(
    features: Tensor | LazyFeatures, noise: Tensor, rhs: Tensor | None = None, outputscale: Tensor | None = None
) -> tuple[Tensor, Tensor | None]:
    r"""The sums :math:`(s\,\Phi^H\Sigma^{-1}\Phi,\; \sqrt s\,\Phi^H\Sigma^{-1}Y)` exactly as
    :func:`factor_capacitance` forms them before factoring (products in the factor dtype unless the features' own are
    known to be accurate, :func:`~gprf.linalg.capacitance.products_in_factor_dtype`): for sums that are added up
    elsewhere first (rows sharded over processes, :mod:`gprf.distributed`). Arguments as in :func:`weighted_sums`;
    differentiable."""
    exact_products = products_in_factor_dtype(features, noise, outputscale)
    return weighted_sums(features, noise, rhs, outputscale, exact_products=exact_products)


def factor_capacitance(
    features: Tensor | LazyFeatures, noise: Tensor, rhs: Tensor | None = None, outputscale: Tensor | None = None
) -> tuple[CapacitanceFactor, Tensor | None]:
    r"""Factor :math:`C = I + s\,\Phi^H\Sigma^{-1}\Phi` and project :math:`P = \sqrt s\,\Phi^H\Sigma^{-1}Y`.

    Arguments as in :func:`weighted_sums`. Returns the :class:`CapacitanceFactor` and :math:`P` (``None`` without
    ``rhs``); with :math:`\tilde\Phi = \sqrt s\,\Phi`, the weight posterior is :math:`N(C^{-1}P, C^{-1})`. Non-finite
    training rows (features, noise or right-hand sides) raise :class:`~gprf.exceptions.NonFiniteTrainingDataError` with
    their count. A root in a lower precision than the factor dtype (float32 models) has its Gram's products in the
    factor dtype unless their own rounding is known to be negligible
    (:func:`~gprf.linalg.capacitance.products_in_factor_dtype`), so a float32 model's predictions and marginal
    likelihood are those of float64 arithmetic on its float32 features to within :math:`10^{-6}` relative.
    """
    gram, projection = capacitance_sums(features, noise, rhs, outputscale)
    eye = torch.eye(gram.size(-1), dtype=gram.dtype, device=gram.device)
    cholesky, failed = cholesky_status(gram + eye, projection)
    if failed:
        raise_for_nonfinite_rows(nonfinite_rows(features, noise, rhs))
        cholesky = psd_safe_cholesky(gram + eye)
    return CapacitanceFactor(cholesky), projection
