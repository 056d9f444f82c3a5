r"""LinearOperators for feature-root covariances :math:`RR^\top` and :math:`RR^\top + \Sigma`."""

from __future__ import annotations

import torch
from linear_operator import to_dense
from linear_operator.operators import (
    ConstantDiagLinearOperator,
    ConstantMulLinearOperator,
    DiagLinearOperator,
    LowRankRootAddedDiagLinearOperator,
    LowRankRootLinearOperator,
)
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from gprf.operators.weighted_gram import weighted_gram, weighted_gram_projection

_FACTOR_DTYPE = torch.float64


class FeatureRootLinearOperator(LowRankRootLinearOperator):
    r""":math:`RR^\top` for a feature root :math:`R` (``N x F``); adding a diagonal noise gives
    :class:`FeatureRootAddedDiagLinearOperator`, whose log-determinant and inverse quadratic form cost
    :math:`O(NF^2)` with the :math:`F\times F` capacitance factored in float64."""

    def add_diagonal(self, diag: Tensor) -> LowRankRootAddedDiagLinearOperator:
        added = super().add_diagonal(diag)
        return FeatureRootAddedDiagLinearOperator(added._linear_op, added._diag_tensor)

    def __add__(self, other):
        if isinstance(other, DiagLinearOperator):
            return FeatureRootAddedDiagLinearOperator(self, other)
        return super().__add__(other)


class FeatureRootAddedDiagLinearOperator(LowRankRootAddedDiagLinearOperator):
    r""":math:`K = RR^\top + \Sigma` with the Gaussian log-density terms computed in feature space.

    With :math:`C = I + R^\top\Sigma^{-1}R = LL^\top` (matrix determinant lemma and Woodbury identity):

    .. math::
        \log\det K = \log\det C + \sum_i \log\sigma_i^2, \qquad
        y^\top K^{-1}y = y^\top\Sigma^{-1}y - \lVert L^{-1}R^\top\Sigma^{-1}y\rVert^2 .

    The Gram matrix is formed in the model dtype with a one-GEMM backward
    (:func:`~gprf.operators.weighted_gram.weighted_gram`) and factored in float64, so float32 models stay
    accurate at small noise; the whole step costs :math:`2NF^2 + O(F^3)` flops forward and backward.
    With fewer points than features (:math:`N < F`, common early in Bayesian optimization) the
    :math:`N\times N` matrix :math:`K` itself is formed and factored in float64 instead,
    :math:`O(N^2F + N^3)`, which avoids the :math:`O(F^3)` factorisation and its backward.
    """

    def _root_parts(self) -> tuple[Tensor, Tensor | None]:
        r"""The dense root, or ``(raw, c)`` when ScaleKernel left it lazily scaled, :math:`R = c\,R_{raw}`."""
        root = self._linear_op.root
        if isinstance(root, ConstantMulLinearOperator):
            return to_dense(root.base_linear_op), root.expanded_constant[..., 0, 0]  # stored as (*batch, 1, 1)
        return to_dense(root), None

    def _noise_variances(self) -> Tensor:
        """Noise variances ``(..., N)``, or ``(..., 1)`` for one variance per batch member (homoscedastic)."""
        if isinstance(self._diag_tensor, ConstantDiagLinearOperator):
            values = self._diag_tensor.diag_values
            while values.dim() > len(self.batch_shape) + 1 and values.size(0) == 1:  # e.g. (1, 1) for no batch
                values = values.squeeze(0)
            return values.expand(*self.batch_shape, 1)
        return self._diag_tensor.diagonal(dim1=-2, dim2=-1)

    def _factor(self, rhs: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor | None, Tensor]:
        r"""``(raw root, noise, projection, L)``: :math:`LL^\top = I + R^\top\Sigma^{-1}R`, projection
        :math:`R^\top\Sigma^{-1}\,\text{rhs}` (float64; ``None`` without ``rhs``), :math:`R = c\,R_{raw}`.

        The amplitude and a constant noise enter through :math:`\Sigma/c^2` (an :math:`O(N)` vector or a
        scalar) and :math:`\text{rhs}/c`, so no scaled copy of the :math:`N\times F` root is formed.
        """
        raw, scale = self._root_parts()
        noise = self._noise_variances()
        effective_noise = noise if scale is None else noise / scale.square().unsqueeze(-1)
        projection = None
        if rhs is not None and raw.dtype == _FACTOR_DTYPE:
            effective_rhs = rhs if scale is None else rhs / scale.unsqueeze(-1).unsqueeze(-1)
            gram, projection = weighted_gram_projection(raw, effective_noise, effective_rhs)
        else:
            gram = weighted_gram(raw, effective_noise).to(_FACTOR_DTYPE)
            if rhs is not None:
                # Lower-precision roots: the two inverse-quadratic terms nearly cancel at small noise, so the
                # projection is formed in float64 (O(NF) work, unlike the Gram).
                scaled_rhs = rhs.to(_FACTOR_DTYPE) / effective_noise.to(_FACTOR_DTYPE).unsqueeze(-1)
                if scale is not None:
                    scaled_rhs = scaled_rhs / scale.to(_FACTOR_DTYPE).unsqueeze(-1).unsqueeze(-1)
                projection = raw.to(_FACTOR_DTYPE).mT @ scaled_rhs
        eye = torch.eye(gram.size(-1), dtype=_FACTOR_DTYPE, device=gram.device)
        return raw, noise, projection, psd_safe_cholesky(gram + eye)

    def inv_quad_logdet(
        self, inv_quad_rhs: Tensor | None = None, logdet: bool | None = False, reduce_inv_quad: bool | None = True
    ) -> tuple[Tensor | None, Tensor | None]:
        if inv_quad_rhs is None and not logdet:
            return None, None
        rhs = None
        if inv_quad_rhs is not None:
            rhs = inv_quad_rhs.unsqueeze(-1) if inv_quad_rhs.dim() == 1 else inv_quad_rhs
            if rhs.size(-2) != self.size(-1):
                raise RuntimeError(
                    f"LinearOperator (size={self.shape}) cannot be multiplied with right-hand side of size {rhs.shape}."
                )
        num_points, num_features = self._linear_op.root.shape[-2:]
        # Fewer points than features (e.g. early Bayesian optimization): the N x N route is the cheaper one.
        terms = self._dense_terms(rhs, logdet) if num_points < num_features else self._feature_space_terms(rhs, logdet)
        inv_quad_term, logdet_term = terms
        if inv_quad_term is not None and reduce_inv_quad:
            inv_quad_term = inv_quad_term.sum(-1)
        if logdet_term is not None:
            logdet_term = logdet_term.expand(self.batch_shape)
        return inv_quad_term, logdet_term

    def _feature_space_terms(self, rhs: Tensor | None, logdet: bool) -> tuple[Tensor | None, Tensor | None]:
        raw, noise, projection, chol = self._factor(rhs)
        noise64 = noise.to(_FACTOR_DTYPE)
        inv_quad_term, logdet_term = None, None
        if rhs is not None:
            rhs64 = rhs.to(_FACTOR_DTYPE)
            whitened = torch.linalg.solve_triangular(chol, projection, upper=False)
            inv_quad_term = ((rhs64.square() / noise64.unsqueeze(-1)).sum(-2) - whitened.square().sum(-2)).to(rhs.dtype)
        if logdet:
            logdet_chol = 2 * chol.diagonal(dim1=-2, dim2=-1).log().sum(-1)
            noise_logdet = noise64.log().expand(*noise64.shape[:-1], raw.size(-2)).sum(-1)
            logdet_term = (logdet_chol + noise_logdet).to(raw.dtype)
        return inv_quad_term, logdet_term

    def _dense_terms(self, rhs: Tensor | None, logdet: bool) -> tuple[Tensor | None, Tensor | None]:
        r""":math:`K = RR^\top + \Sigma` formed and factored in float64: :math:`O(N^2F + N^3)` for :math:`N < F`."""
        root = to_dense(self._linear_op.root)
        root64 = root.to(_FACTOR_DTYPE)
        noise64 = self._noise_variances().to(_FACTOR_DTYPE).expand(*root64.shape[:-1])
        chol = psd_safe_cholesky(root64 @ root64.mT + torch.diag_embed(noise64))
        inv_quad_term, logdet_term = None, None
        if rhs is not None:
            whitened = torch.linalg.solve_triangular(chol, rhs.to(_FACTOR_DTYPE), upper=False)
            inv_quad_term = whitened.square().sum(-2).to(rhs.dtype)
        if logdet:
            logdet_term = (2 * chol.diagonal(dim1=-2, dim2=-1).log().sum(-1)).to(root.dtype)
        return inv_quad_term, logdet_term
