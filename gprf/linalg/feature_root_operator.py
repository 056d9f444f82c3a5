r"""The covariance :math:`K = s\,RR^\top` of a feature kernel, carrying its :class:`~gprf.linalg.FeatureRoot`."""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

import torch
from linear_operator.operators import (
    ConstantDiagLinearOperator,
    DenseLinearOperator,
    DiagLinearOperator,
    LinearOperator,
    LowRankRootLinearOperator,
    MatmulLinearOperator,
    ZeroLinearOperator,
)
from torch import Tensor

from gprf.exceptions import LowRankStructureWarning
from gprf.linalg.feature_root import FeatureRoot
from gprf.linalg.feature_root_added_diag_operator import FeatureRootAddedDiagLinearOperator
from gprf.linalg.lazy_features import LazyFeatures
from gprf.linalg.points_factor import points_gram
from gprf.linalg.root_algebra import kronecker_product, registered_root_product, sum_roots, task_rows
from gprf.settings import factor_dtype


class FeatureRootLinearOperator(LowRankRootLinearOperator):
    r""":math:`K = s\,RR^\top` for a real feature root :math:`R` ``(*batch, N, F)`` and an amplitude :math:`s`.

    What every gprf feature kernel returns for :math:`K(X, X)`. The root, the amplitude and the optional extras
    (the inputs the feature map took, the feature-draw versions) are kept apart and read back with
    :attr:`feature_root`; ``ScaleKernel`` multiplies :math:`s` (no scaled copy of :math:`R`, no
    host synchronisation). Adding a diagonal noise gives
    :class:`~gprf.linalg.FeatureRootAddedDiagLinearOperator`, whose Gaussian log density costs
    :math:`O(NF^2)`. As a ``LowRankRootLinearOperator`` with root :math:`\sqrt s\,R` it works wherever GPyTorch
    expects one (sampling, root decompositions).

    The root may be lazy (:class:`~gprf.linalg.LazyFeatures`, for large :math:`NF`): the marginal likelihood then
    sums over row chunks without forming it, row slices stay lazy, and everything else (products, diagonals, dense
    evaluations, sampling, batch reshaping) forms it on first use.

    The operator holds one :class:`~gprf.linalg.FeatureRoot` (:attr:`feature_root`) and reshapes, indexes and scales
    it through that record's own methods, so a part added to the record needs no change here.

    GPyTorch's own kernel algebra keeps the root (:mod:`gprf.linalg.root_algebra`): ``AdditiveKernel`` adds the parts'
    covariances, and the sum of two feature roots is one (:math:`[\sqrt{s_1}R_1, \sqrt{s_2}R_2]`); ``ProductKernel``
    multiplies them elementwise, and the product with an exact root (a task covariance of ``IndexKernel``, or a root
    without random draws) is the exact row-wise Kronecker product, the product of two random roots the product
    kernel's own features (a rule the kernels register, which reads :attr:`origin`). A sum or product with a
    covariance that has no feature root (an exact GPyTorch kernel) is formed densely and warns with
    :class:`~gprf.exceptions.LowRankStructureWarning`, as does any dense evaluation of more points than columns.

    Args:
        features: :math:`R`, a tensor or a :class:`~gprf.linalg.LazyFeatures`.
        origin: Where the root comes from (the kernel and the inputs it featurised; opaque here), for the rule that
            multiplies two random roots; kept by scaling, dropped by reshaping and indexing.
        parts: The other parts of the :class:`~gprf.linalg.FeatureRoot` by name (``outputscale`` :math:`s`
            ``(*batch)``, broadcast to the batch shape; ``inputs``; ``versions``), all but the noise: adding it is
            ``add_diagonal``.
    """

    def __init__(self, features: Tensor | LazyFeatures, origin: Any = None, **parts: Any) -> None:
        if parts.get("noise") is not None:
            raise ValueError(
                "FeatureRootLinearOperator is the covariance without noise; add the noise variances with "
                "add_diagonal (a FeatureRootAddedDiagLinearOperator) instead of passing noise=."
            )
        outputscale = parts.get("outputscale")
        if outputscale is not None and outputscale.shape != features.shape[:-2]:
            # Only when needed: linear_operator rebuilds the operator from its (already expanded) representation in
            # backward passes, and a new view of a representation made to require gradients after construction
            # (``detach().requires_grad_()``) would not pass them on.
            parts["outputscale"] = outputscale.expand(features.shape[:-2])
        feature_root = FeatureRoot(features, **parts)
        # LinearOperator's constructor records these arguments, which is how linear_operator rebuilds the
        # operator (representation trees, clone, to, detach); the parent's would record the root instead.
        LinearOperator.__init__(self, features, origin=origin, **parts)
        self.feature_root = feature_root
        #: Where the root comes from (the kernel and the inputs it featurised; opaque here), or ``None``.
        self.origin = origin

    @classmethod
    def from_root(cls, root: FeatureRoot, origin: Any = None) -> FeatureRootLinearOperator:
        """The covariance :math:`s\\,RR^\\top` of a hand-off without noise."""
        parts = {part.name: getattr(root, part.name) for part in fields(root) if part.name not in ("source", "noise")}
        return cls(root.source, origin=origin, **parts)

    @property
    def root(self) -> LinearOperator:
        """:math:`\\sqrt s\\,R` as a linear operator (GPyTorch's root decompositions and sampling; a scaled copy)."""
        return _RootFactor(self.feature_root.scaled_features())

    def _size(self) -> torch.Size:
        shape = self.feature_root.source.shape
        return torch.Size((*shape[:-2], shape[-2], shape[-2]))

    def _root_decomposition_size(self) -> int:
        # linear_operator asks a root for this size only when its MulLinearOperator multiplies it elementwise with
        # another covariance (gprf's own products never build one; a root's root decomposition is itself): GPyTorch's
        # ProductKernel with a factor before the feature kernel that has no feature root, e.g. a task IndexKernel.
        _warn_dense(
            "GPyTorch multiplying a covariance without a feature root (a factor before the feature kernel, e.g. a task "
            "IndexKernel) elementwise by a random-feature covariance",
            MULTIPLY_FIX,
        )
        return self.feature_root.num_columns

    # ------------------------------------------------------------------ structure-preserving operations
    def _mul_constant(self, other: Tensor) -> FeatureRootLinearOperator:
        # linear_operator's RootLinearOperator tests the sign of the constant (a host synchronisation) to scale
        # the root by its square root; keeping the amplitude apart needs neither, and products, diagonals and
        # dense evaluations below stay exact for any sign.
        root = self.feature_root
        other = torch.as_tensor(other, dtype=root.dtype, device=root.source.device)
        outputscale = other if root.outputscale is None else root.outputscale * other
        return self.from_root(replace(root, outputscale=outputscale.expand(self.batch_shape)), self.origin)

    def _expand_batch(self, batch_shape: torch.Size) -> FeatureRootLinearOperator:
        if len(batch_shape) == 0:
            return self
        return self._map_parts(lambda t, tail: t.expand(*batch_shape, *t.shape[t.dim() - tail :]))

    def _unsqueeze_batch(self, dim: int) -> FeatureRootLinearOperator:
        return self._map_parts(lambda t, tail: t.unsqueeze(dim))

    def _permute_batch(self, *dims: int) -> FeatureRootLinearOperator:
        return self._map_parts(lambda t, tail: t.permute(*dims, *range(len(dims), len(dims) + tail)))

    def _map_parts(self, fn: Callable[[Tensor, int], Tensor]) -> FeatureRootLinearOperator:
        """``fn(tensor, trailing non-batch dims)`` applied to every part of the hand-off."""
        return self.from_root(self.feature_root.map_tensors(fn))

    def _getitem(self, row_index, col_index, *batch_indices) -> LinearOperator:
        same_rows = isinstance(row_index, slice) and row_index == col_index
        if same_rows and not any(torch.is_tensor(index) for index in batch_indices):
            # Rows of a symmetric covariance (e.g. a batch member, or the training block): keep the hand-off.
            return self.from_root(self.feature_root.rows(row_index, batch_indices))
        rows = self.root._getitem(row_index, slice(None), *batch_indices)
        if same_rows:
            return LowRankRootLinearOperator(rows)
        columns = self.root._getitem(col_index, slice(None), *batch_indices)
        return MatmulLinearOperator(rows, columns.mT)

    def _amplitude_sign(self) -> Tensor:
        """The sign of :math:`s` ``(*batch, 1)`` (+1 without an amplitude, and for :math:`s = 0`)."""
        outputscale = self.feature_root.outputscale
        if outputscale is None:
            return torch.ones(*self.batch_shape, 1, dtype=self.dtype, device=self.device)
        return torch.where(outputscale < 0, -1.0, 1.0).to(self.dtype).unsqueeze(-1)

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
        """``tensor`` times :math:`s` itself (not its square root, so any sign stays exact)."""
        outputscale = self.feature_root.outputscale
        if outputscale is None:
            return tensor
        return tensor * outputscale.reshape(*outputscale.shape, *(1,) * trailing)

    def _matmul(self, rhs: Tensor) -> Tensor:
        features = self.feature_root.features
        return self._scale(features @ (features.mT @ rhs), 2 if rhs.dim() >= 2 else 1)

    def _t_matmul(self, rhs: Tensor) -> Tensor:
        return self._matmul(rhs)

    def _diagonal(self) -> Tensor:
        return self._scale(self.feature_root.features.square().sum(-1), 1)

    def to_dense(self) -> Tensor:
        features = self.feature_root.features
        if features.size(-2) > features.size(-1):
            warnings.warn(
                f"Forming the dense {features.size(-2)} x {features.size(-2)} matrix of a random-feature covariance "
                f"of rank {features.size(-1)} (O(N^2) memory, O(N^3) to factor). Where to_dense() is not your own "
                "call, GPyTorch does this in a ProductKernel whose factor before the feature kernel has no feature "
                "root (an exact kernel): multiply feature kernels, the feature kernel first (ScaleKernel(k1) * k2, "
                "covar_module * IndexKernel(...)), and approximate exact factors with gprf.random_features.",
                LowRankStructureWarning,
                stacklevel=2,
            )
        return self._dense()

    def _dense(self) -> Tensor:
        return self._scale(points_gram(self.feature_root.features), 2)

    # ------------------------------------------------------------------ adding the noise
    def add_diagonal(self, diag: Tensor) -> FeatureRootAddedDiagLinearOperator:
        num_points = self.size(-1)
        if diag.dim() == 0 or diag.size(-1) == 1:  # one variance (per batch member): keep it a constant
            diag = diag.unsqueeze(-1) if diag.dim() == 0 else diag
            return FeatureRootAddedDiagLinearOperator(self, ConstantDiagLinearOperator(diag, diag_shape=num_points))
        return FeatureRootAddedDiagLinearOperator(self, DiagLinearOperator(diag.expand(*self.shape[:-1])))

    # ------------------------------------------------------------------ GPyTorch's kernel algebra
    def __add__(self, other):
        if isinstance(other, DiagLinearOperator):
            return FeatureRootAddedDiagLinearOperator(self, other)
        if isinstance(other, ZeroLinearOperator) or (isinstance(other, numbers.Number) and other == 0):
            return self
        if isinstance(other, LinearOperator):
            other = other.evaluate_kernel()
        if isinstance(other, FeatureRootLinearOperator):
            return self.from_root(sum_roots(self.feature_root, other.feature_root))
        _warn_dense(f"Adding a {type(other).__name__} (no feature root) to a random-feature covariance", ADD_FIX)
        return super().__add__(other)

    def _mul_matrix(self, other: LinearOperator) -> LinearOperator:
        other = other.evaluate_kernel()
        if isinstance(other, FeatureRootLinearOperator):
            product = registered_root_product(self, other)
            if product is not None:
                return product
            if not self.feature_root.versions or not other.feature_root.versions:  # an exact root: exact product
                return self.from_root(kronecker_product(self.feature_root, other.feature_root))
            what = "another random-feature covariance whose kernel is unknown (e.g. a GPyTorch sum inside a product)"
        else:
            rows = task_rows(other)
            if rows is not None:
                return self.from_root(kronecker_product(self.feature_root, rows))
            what = f"a {type(other).__name__} (no feature root)"
        _warn_dense(f"Multiplying a random-feature covariance elementwise by {what}", MULTIPLY_FIX)
        return DenseLinearOperator(self._dense() * other.to_dense())


ADD_FIX = "add feature kernels (k1 + k2, ScaleKernel(k1) + ScaleKernel(k2), FeatureSumKernel)"
MULTIPLY_FIX = (
    "multiply feature kernels, a feature kernel first (k1 * k2, ScaleKernel(k1) * k2, ScaleKernel(k1 * k2), "
    "FeatureProductKernel, covar_module * IndexKernel(...))"
)


def _warn_dense(what: str, fix: str) -> None:
    """Warn that ``what`` (combining a feature root with a covariance gprf cannot combine it with) is dense."""
    warnings.warn(
        f"{what} gives a dense N x N covariance (O(N^3) training): e.g. an exact GPyTorch kernel in AdditiveKernel or "
        f"ProductKernel. Approximate that part with gprf.random_features and {fix}.",
        LowRankStructureWarning,
        stacklevel=3,
    )


class _RootFactor(DenseLinearOperator):
    """The root :math:`\\sqrt s\\,R` handed to linear_operator's generic code, which forms the covariance
    :math:`RR^\\top` from it only when it adds the root to a covariance without one (``add_low_rank``: GPyTorch's
    AdditiveKernel with a part before the feature kernel that has no feature root): that Gram is dense, and says so."""

    def matmul(self, other):
        gram = isinstance(other, DenseLinearOperator) and _is_transpose(other.tensor, self.tensor)
        if gram and self.tensor.size(-2) > self.tensor.size(-1):
            _warn_dense(
                "GPyTorch adding a random-feature covariance to a covariance without a feature root (a part before the "
                "feature kernel)",
                ADD_FIX,
            )
        return super().matmul(other)


def _is_transpose(first: Tensor, second: Tensor) -> bool:
    """Whether ``first`` is the transposed view of ``second``."""
    transposed = second.mT
    same_layout = (first.shape, first.stride()) == (transposed.shape, transposed.stride())
    return same_layout and first.data_ptr() == second.data_ptr()
