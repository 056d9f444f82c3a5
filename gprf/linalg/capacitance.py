r"""The one home of gprf's factorisations: the capacitance :math:`C = I + s\,\Phi^H\Sigma^{-1}\Phi`.

Every consumer of a feature root — the marginal likelihood, the prediction strategies, fantasies, streaming
and BoTorch's pathwise update — forms and factors :math:`C` here, in the dtype of
:class:`gprf.settings.factor_dtype` (float64 by default, whatever the model dtype), and every factorisation
checks its training data once: when the factor or the projection is not finite, the rows responsible are
counted and reported (:class:`~gprf.exceptions.NonFiniteTrainingDataError`) instead of returning NaN.
That check costs no extra host synchronisation: it shares the one read of the Cholesky status that any
factorisation needs to decide whether it succeeded.
"""

from __future__ import annotations

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

# The largest estimated rounding error u * tr(G) of a Gram formed with lower-precision products that is kept; see
# gram_rounding_exceeds for the derivation.
GRAM_ROUNDING_TOLERANCE = 0.25


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


def cholesky_status(
    matrix: Tensor, also_finite: Tensor | None = None, also_fail: Tensor | None = None
) -> tuple[Tensor, bool]:
    """``torch.linalg.cholesky_ex`` of ``matrix`` and whether it failed, ``also_finite`` is not finite, or the
    boolean tensor ``also_fail`` is set — the one host synchronisation of a factorisation."""
    cholesky, info = torch.linalg.cholesky_ex(matrix)
    failed = info.ne(0).any() | ~torch.isfinite(cholesky.diagonal(dim1=-2, dim2=-1)).all()
    if also_finite is not None:
        failed = failed | ~torch.isfinite(also_finite).all()
    if also_fail is not None:
        failed = failed | also_fail
    return cholesky, bool(failed)


def gram_rounding_exceeds(gram: Tensor, product_dtype: torch.dtype) -> Tensor | None:
    r"""Whether ``gram`` :math:`= s\,R^\top\Sigma^{-1}R`, formed with ``product_dtype`` products, may be too inexact
    for the capacitance :math:`I + G` (a boolean tensor, no host synchronisation), or ``None`` when the products
    were at least as precise as ``gram``.

    Forming :math:`G` with unit roundoff :math:`u` gives :math:`G + E` with :math:`|E| \le \gamma\,|R|^\top
    \Sigma^{-1}|R|` elementwise, so :math:`\lVert E\rVert_2 \le \gamma\,\mathrm{tr}(|R|^\top\Sigma^{-1}|R|) =
    \gamma\,\mathrm{tr}\,G` (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., SIAM 2002,
    §3.5). The worst case is :math:`\gamma = Nu`; blocked float32 GEMMs measured on random Fourier roots
    (:math:`N` = 500–8000, :math:`F` = 128–1024, lengthscales 0.2–1) stay below :math:`0.6\,u\,\mathrm{tr}\,G`,
    so :math:`\gamma = u` is kept as the estimate. Every eigenvalue of :math:`I + G` is at least 1, so by Weyl's
    inequality :math:`u\,\mathrm{tr}\,G \le` :data:`GRAM_ROUNDING_TOLERANCE` (1/4) moves none of them by more
    than about 15% (and keeps the factorisation positive definite); beyond it (e.g. float32 models at noise
    :math:`10^{-6}`, where :math:`u\,\mathrm{tr}\,G \approx 6\cdot 10^{-8} N s/\sigma^2 \gg 1`) the Gram is
    formed again with products in the factor dtype. At ordinary noise levels (:math:`s/\sigma^2 \lesssim 10^2`,
    :math:`N \lesssim 4\cdot 10^4`) the float32 products are kept.
    """
    if torch.finfo(product_dtype).eps <= torch.finfo(gram.dtype).eps:
        return None
    return _trace_rounding_exceeds(gram.diagonal(dim1=-2, dim2=-1).sum(-1), product_dtype).any()


def _trace_rounding_exceeds(trace: Tensor, product_dtype: torch.dtype) -> Tensor:
    """The test of :func:`gram_rounding_exceeds` on the trace of the Gram."""
    return torch.finfo(product_dtype).eps / 2 * trace > GRAM_ROUNDING_TOLERANCE


def _known_inexact_before_forming(features: Tensor | LazyFeatures, noise: Tensor, outputscale: Tensor | None) -> bool:
    r"""Whether the Gram of a formed CPU root in a lower precision than the factor dtype would fail
        :func:`gram_rounding_exceeds`, decided before forming it from its trace :math:`s\sum_i\lVert r_i
    Vert^2/
        \sigma_i^2` (an :math:`O(NF)` pass).

        Reading a CPU tensor synchronises with no device, so deciding first is free there and saves the low-precision
        Gram that would be formed only to be thrown away (a third of the work at float32 and float64 GEMM speeds that
        differ by two). On a GPU the test stays inside the factorisation's one host synchronisation.
    """
    if isinstance(features, LazyFeatures) or features.device.type != "cpu" or features.is_complex():
        return False
    if torch.finfo(features.dtype).eps <= torch.finfo(factor_dtype.value()).eps:
        return False
    variances = noise if outputscale is None else noise / outputscale.unsqueeze(-1)
    # Row norms by a reduction in float64: no N x F temporary on the marginal likelihood's path.
    row_norms = torch.linalg.vector_norm(features, dim=-1, dtype=torch.float64).square()
    trace = (row_norms / variances.to(torch.float64)).sum(-1)
    return bool(_trace_rounding_exceeds(trace, features.dtype).any())


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
    through :math:`\Sigma/s` and :math:`Y/\sqrt s`, so no scaled copy of :math:`\Phi` is made. The Gram is formed in
    the features' dtype (float32 models: one float32 GEMM, :func:`~gprf.linalg.weighted_gram`) and cast, or with
    products in the factor dtype when ``exact_products`` (row chunks cast one at a time, so no :math:`N\times F`
    copy); the projection is formed in the factor dtype, because the two inverse-quadratic terms it enters nearly
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


def factor_capacitance(
    features: Tensor | LazyFeatures, noise: Tensor, rhs: Tensor | None = None, outputscale: Tensor | None = None
) -> tuple[CapacitanceFactor, Tensor | None]:
    r"""Factor :math:`C = I + s\,\Phi^H\Sigma^{-1}\Phi` and project :math:`P = \sqrt s\,\Phi^H\Sigma^{-1}Y`.

    Arguments as in :func:`weighted_sums`. Returns the :class:`CapacitanceFactor` and :math:`P` (``None`` without
    ``rhs``); with :math:`\tilde\Phi = \sqrt s\,\Phi`, the weight posterior is :math:`N(C^{-1}P, C^{-1})`.
    Non-finite training rows (features, noise or right-hand sides) raise
    :class:`~gprf.exceptions.NonFiniteTrainingDataError` with their count. A Gram formed with lower-precision
    products (float32 roots) whose rounding may be too large (:func:`gram_rounding_exceeds`), or whose capacitance
    fails to factor, is formed again with products in the factor dtype; both conditions share the factorisation's
    one host synchronisation. For a formed CPU root the rounding test is made before the Gram, from its trace, so a
    Gram that would be discarded is not formed at all.
    """
    exact_products = _known_inexact_before_forming(features, noise, outputscale)
    gram, projection = weighted_sums(features, noise, rhs, outputscale, exact_products=exact_products)
    inexact = None if exact_products or features.dtype.is_complex else gram_rounding_exceeds(gram, features.dtype)
    eye = torch.eye(gram.size(-1), dtype=gram.dtype, device=gram.device)
    cholesky, failed = cholesky_status(gram + eye, projection, inexact)
    if failed:
        raise_for_nonfinite_rows(nonfinite_rows(features, noise, rhs))
        if inexact is not None:
            gram, projection = weighted_sums(features, noise, rhs, outputscale, exact_products=True)
        cholesky = psd_safe_cholesky(gram + eye)
    return CapacitanceFactor(cholesky), projection
