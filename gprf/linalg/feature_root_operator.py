r"""The covariance :math:`K = s\,RR^\top` of a feature kernel, carrying its :class:`~gprf.linalg.FeatureRoot`."""

from __future__ import annotations

from collections.abc import Callable

import torch
from linear_operator.operators import (
    ConstantDiagLinearOperator,
    ConstantMulLinearOperator,
    DenseLinearOperator,
    DiagLinearOperator,
    LinearOperator,
    LowRankRootLinearOperator,
    MatmulLinearOperator,
)
from torch import Tensor

from gprf.linalg.feature_root import FeatureRoot
from gprf.linalg.feature_root_added_diag_operator import FeatureRootAddedDiagLinearOperator
from gprf.linalg.lazy_features import LazyFeatures
from gprf.settings import factor_dtype


class FeatureRootLinearOperator(LowRankRootLinearOperator):
    r""":math:`K = s\,RR^\top` for a real feature root :math:`R` ``(*batch, N, F)`` and an amplitude :math:`s`.

    What every gprf feature kernel returns for :math:`K(X, X)`. The root, the amplitude and the optional extras
    (scaled inputs and a re-centring map for localized prediction, the feature-draw versions) are kept apart and
    read back with :attr:`feature_root`; ``ScaleKernel`` multiplies :math:`s` (no scaled copy of :math:`R`, no
    host synchronisation). Adding a diagonal noise gives
    :class:`~gprf.linalg.FeatureRootAddedDiagLinearOperator`, whose Gaussian log density costs
    :math:`O(NF^2)`. As a ``LowRankRootLinearOperator`` with root :math:`\sqrt s\,R` it works wherever GPyTorch
    expects one (sampling, root decompositions).

    The root may be lazy (:class:`~gprf.linalg.LazyFeatures`, for large :math:`NF`): the marginal likelihood then
    sums over row chunks without forming it, row slices stay lazy, and everything else (products, diagonals, dense
    evaluations, sampling, batch reshaping) forms it on first use.

    Args:
        features: :math:`R`, a tensor or a :class:`~gprf.linalg.LazyFeatures`.
        outputscale: :math:`s` ``(*batch)`` (broadcast to the batch shape), or ``None`` for 1.
        inputs: Scaled inputs :math:`Z` ``(*batch, N, d)`` (see :class:`~gprf.linalg.FeatureRoot`).
        recentred_features: :math:`(Z, c) \mapsto R_c(Z)` (see :class:`~gprf.linalg.FeatureRoot`).
        versions: Draw versions of the feature maps behind :math:`R`.
    """

    def __init__(
        self,
        features: Tensor | LazyFeatures,
        outputscale: Tensor | None = None,
        inputs: Tensor | None = None,
        *,
        recentred_features: Callable[[Tensor, Tensor], Tensor] | None = None,
        versions: tuple[int, ...] = (),
    ) -> None:
        if outputscale is not None and outputscale.shape != features.shape[:-2]:
            # Only when needed: linear_operator rebuilds the operator from its (already expanded) representation in
            # backward passes, and a new view of a representation made to require gradients after construction
            # (``detach().requires_grad_()``) would not pass them on.
            outputscale = outputscale.expand(features.shape[:-2])
        # LinearOperator's constructor records these arguments, which is how linear_operator rebuilds the
        # operator (representation trees, clone, to, detach); the parent's would record the root instead.
        LinearOperator.__init__(
            self,
            features,
            outputscale=outputscale,
            inputs=inputs,
            recentred_features=recentred_features,
            versions=versions,
        )
        self.source = features
        self.outputscale = outputscale
        self.inputs = inputs
        self.recentred_features = recentred_features
        self.versions = versions

    @property
    def features(self) -> Tensor:
        """:math:`R` as a tensor (formed here when it is lazy)."""
        return self.source.materialize() if isinstance(self.source, LazyFeatures) else self.source

    @property
    def root(self) -> LinearOperator:
        """:math:`\\sqrt s\\,R` as a linear operator (GPyTorch's root decompositions and sampling)."""
        dense = DenseLinearOperator(self.features)
        return dense if self.outputscale is None else ConstantMulLinearOperator(dense, self.outputscale.sqrt())

    @property
    def feature_root(self) -> FeatureRoot:
        """The hand-off (without noise)."""
        return FeatureRoot(self.source, self.outputscale, None, self.inputs, self.recentred_features, self.versions)

    def _size(self) -> torch.Size:
        shape = self.source.shape
        return torch.Size((*shape[:-2], shape[-2], shape[-2]))

    def _root_decomposition_size(self) -> int:
        return self.source.shape[-1]

    def _rebuild(
        self, features: Tensor | LazyFeatures, outputscale: Tensor | None, inputs: Tensor | None
    ) -> FeatureRootLinearOperator:
        return FeatureRootLinearOperator(
            features, outputscale, inputs, recentred_features=self.recentred_features, versions=self.versions
        )

    # ------------------------------------------------------------------ structure-preserving operations
    def _mul_constant(self, other: Tensor) -> FeatureRootLinearOperator:
        # linear_operator's RootLinearOperator tests the sign of the constant (a host synchronisation) to scale
        # the root by its square root; keeping the amplitude apart needs neither, and products, diagonals and
        # dense evaluations below stay exact for any sign.
        other = torch.as_tensor(other, dtype=self.source.dtype, device=self.source.device)
        outputscale = other if self.outputscale is None else self.outputscale * other
        return self._rebuild(self.source, outputscale.expand(self.batch_shape), self.inputs)

    def _expand_batch(self, batch_shape: torch.Size) -> FeatureRootLinearOperator:
        if len(batch_shape) == 0:
            return self
        return self._rebuild(*self._map_tensors(lambda t, tail: t.expand(*batch_shape, *t.shape[t.dim() - tail :])))

    def _unsqueeze_batch(self, dim: int) -> FeatureRootLinearOperator:
        return self._rebuild(*self._map_tensors(lambda t, tail: t.unsqueeze(dim)))

    def _permute_batch(self, *dims: int) -> FeatureRootLinearOperator:
        def permute(t: Tensor, tail: int) -> Tensor:
            return t.permute(*dims, *range(len(dims), len(dims) + tail))

        return self._rebuild(*self._map_tensors(permute))

    def _map_tensors(self, fn: Callable[[Tensor, int], Tensor]) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """``fn(tensor, trailing non-batch dims)`` applied to the features, the amplitude and the inputs."""
        outputscale = None if self.outputscale is None else fn(self.outputscale, 0)
        inputs = None if self.inputs is None else fn(self.inputs, 2)
        return fn(self.features, 2), outputscale, inputs

    def _getitem(self, row_index, col_index, *batch_indices) -> LinearOperator:
        same_rows = isinstance(row_index, slice) and row_index == col_index
        if same_rows and not any(torch.is_tensor(index) for index in batch_indices):
            # Rows of a symmetric covariance (e.g. a batch member, or the training block): keep the hand-off.
            index = (*batch_indices, row_index, slice(None))
            outputscale = None if self.outputscale is None else self.outputscale[batch_indices]
            inputs = None if self.inputs is None else self.inputs[index]
            if isinstance(self.source, LazyFeatures) and all(index == slice(None) for index in batch_indices):
                return self._rebuild(self.source.rows(row_index), outputscale, inputs)  # e.g. the training block
            return self._rebuild(self.features[index], outputscale, inputs)
        rows = self.root._getitem(row_index, slice(None), *batch_indices)
        if same_rows:
            return LowRankRootLinearOperator(rows)
        columns = self.root._getitem(col_index, slice(None), *batch_indices)
        return MatmulLinearOperator(rows, columns.mT)

    def _amplitude_sign(self) -> Tensor:
        """The sign of :math:`s` ``(*batch, 1)`` (+1 without an amplitude, and for :math:`s = 0`)."""
        if self.outputscale is None:
            return self.source.new_ones(*self.batch_shape, 1)
        return torch.where(self.outputscale < 0, -1.0, 1.0).to(self.source.dtype).unsqueeze(-1)

    def _symeig(self, eigenvectors: bool = False, return_evals_as_lazy: bool | None = False):
        # The eigenvalues of s R R^T have the sign of s: the rounding noise of its zero eigenvalues is clipped to zero
        # from the other side (linear_operator's default clips negative ones, all of a negated covariance's).
        evals, evecs = torch.linalg.eigh(self.to_dense().to(factor_dtype.value()))
        sign = self._amplitude_sign()
        evals = (evals * sign).clamp_min(0).to(self.dtype) * sign
        return evals, DenseLinearOperator(evecs.to(self.dtype)) if eigenvectors else None

    def _svd(self) -> tuple[LinearOperator, Tensor, LinearOperator]:
        # U = V sign(s) and S = |eigenvalues|: linear_operator's default signs each eigenvalue, dropping the column of a
        # zero one and flipping those of rounding noise, and AddedDiagLinearOperator adds a constant noise to S with
        # this U (a negative sign there would subtract it).
        evals, evecs = self._symeig(eigenvectors=True)
        return evecs * self._amplitude_sign().unsqueeze(-2), evals.abs(), evecs

    def _prod_batch(self, dim: int) -> LinearOperator:
        # The elementwise product over a batch dimension, formed densely: linear_operator's default multiplies root
        # decompositions and pads an odd count with a constant root that is the all-ones matrix only for N columns.
        return DenseLinearOperator(self.to_dense().prod(dim))

    # ------------------------------------------------------------------ exact for any sign of the amplitude
    def _scale(self, tensor: Tensor, trailing: int) -> Tensor:
        if self.outputscale is None:
            return tensor
        return tensor * self.outputscale.reshape(*self.outputscale.shape, *(1,) * trailing)

    def _matmul(self, rhs: Tensor) -> Tensor:
        features = self.features
        return self._scale(features @ (features.mT @ rhs), 2 if rhs.dim() >= 2 else 1)

    def _t_matmul(self, rhs: Tensor) -> Tensor:
        return self._matmul(rhs)

    def _diagonal(self) -> Tensor:
        return self._scale(self.features.square().sum(-1), 1)

    def to_dense(self) -> Tensor:
        features = self.features
        return self._scale(features @ features.mT, 2)

    # ------------------------------------------------------------------ adding the noise
    def add_diagonal(self, diag: Tensor) -> FeatureRootAddedDiagLinearOperator:
        num_points = self.size(-1)
        if diag.dim() == 0 or diag.size(-1) == 1:  # one variance (per batch member): keep it a constant
            diag = diag.unsqueeze(-1) if diag.dim() == 0 else diag
            return FeatureRootAddedDiagLinearOperator(self, ConstantDiagLinearOperator(diag, diag_shape=num_points))
        return FeatureRootAddedDiagLinearOperator(self, DiagLinearOperator(diag.expand(*self.shape[:-1])))

    def __add__(self, other):
        if isinstance(other, DiagLinearOperator):
            return FeatureRootAddedDiagLinearOperator(self, other)
        return super().__add__(other)
