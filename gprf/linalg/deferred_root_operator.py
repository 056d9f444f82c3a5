r"""A feature root :math:`R` (or its transpose :math:`R^\top`) of inputs that are featurised only when a consumer reads
it."""

from __future__ import annotations

import torch
from linear_operator.operators import DenseLinearOperator, LinearOperator
from torch import Tensor

from gprf.linalg.chunked_gram import FeatureFunction


class DeferredRootLinearOperator(LinearOperator):
    r""":math:`R = f(X)` ``(*batch, N, F)``, or :math:`R^\top` ``(*batch, F, N)`` with ``transposed``, formed on first
    use.

    The cross covariance :math:`K(X_1, X_2) = R_1 R_2^\top` of a feature kernel is the product of two of these.
    GPyTorch's exact prediction evaluates the test-train block :math:`K(X_*, X)` of every call, with the training
    inputs expanded to the batch shape of the test inputs, while gprf's feature-space prediction never reads that block
    (the training rows are in its cached :math:`F\times F` factor, the test rows' features come from the test-test
    block): formed eagerly, a batch of 64 candidate sets featurised all :math:`N` training rows 64 times, and every
    posterior call featurised its test points twice. Kept deferred, the rows are featurised only if a consumer (a
    dense fallback strategy, ``to_dense``) multiplies with the block.

    Args:
        inputs: :math:`X` ``(*batch, N, d)``, as ``feature_fn`` takes them.
        params: The tensors requiring gradients that ``feature_fn`` uses besides its argument (the kernel's
            parameters): they are part of the representation, so gradients through products with this operator
            reach them (and ``inputs``).
        feature_fn: :math:`f`, mapping rows ``(*batch, n, d)`` to their features ``(*batch', n, F)``.
        batch_shape: The batch shape of :math:`R` (the inputs' and the kernel's, broadcast).
        num_features: :math:`F`.
        transposed: Whether the operator is :math:`R^\top` (the right factor of a cross covariance).
    """

    def __init__(
        self,
        inputs: Tensor,
        *params: Tensor,
        feature_fn: FeatureFunction,
        batch_shape: torch.Size,
        num_features: int,
        transposed: bool = False,
    ) -> None:
        super().__init__(
            inputs,
            *params,
            feature_fn=feature_fn,
            batch_shape=batch_shape,
            num_features=num_features,
            transposed=transposed,
        )
        self.inputs = inputs
        self.params = params
        self.feature_fn = feature_fn
        self.root_batch_shape = torch.Size(batch_shape)
        self.num_features = num_features
        self.transposed = transposed
        self._root: Tensor | None = None

    def root(self) -> Tensor:
        """:math:`R = f(X)` ``(*batch, N, F)``: formed once without gradients, and afresh for each differentiable use
        (a cached graph could not be back-propagated twice)."""
        if torch.is_grad_enabled() and self.requires_grad:
            return self._formed()
        if self._root is None:
            self._root = self._formed()
        return self._root

    def _formed(self) -> Tensor:
        root = self.feature_fn(self.inputs)
        return root.expand(*self.root_batch_shape, *root.shape[-2:])

    def _oriented(self, root: Tensor) -> Tensor:
        """``root`` :math:`R` as this operator's matrix (:math:`R^\\top` when transposed)."""
        return root.mT if self.transposed else root

    def _size(self) -> torch.Size:
        rows, columns = self.inputs.size(-2), self.num_features
        return torch.Size((*self.root_batch_shape, *((columns, rows) if self.transposed else (rows, columns))))

    def _matmul(self, rhs: Tensor) -> Tensor:
        return self._oriented(self.root()) @ rhs

    def _t_matmul(self, rhs: Tensor) -> Tensor:
        return self._oriented(self.root()).mT @ rhs

    def _transpose_nonbatch(self) -> LinearOperator:
        flipped = DeferredRootLinearOperator(
            self.inputs,
            *self.params,
            feature_fn=self.feature_fn,
            batch_shape=self.root_batch_shape,
            num_features=self.num_features,
            transposed=not self.transposed,
        )
        flipped._root = self._root  # a root formed without gradients serves both orientations
        return flipped

    def to_dense(self) -> Tensor:
        return self._oriented(self.root())

    def _dense(self) -> DenseLinearOperator:
        return DenseLinearOperator(self.to_dense())

    # Indexing and batch reshaping act on the formed matrix: the representation (inputs and kernel parameters) does
    # not index like the matrix does.
    def _getitem(self, row_index, col_index, *batch_indices) -> LinearOperator:
        return self._dense()._getitem(row_index, col_index, *batch_indices)

    def _get_indices(self, row_index, col_index, *batch_indices) -> Tensor:
        return self._dense()._get_indices(row_index, col_index, *batch_indices)

    def _expand_batch(self, batch_shape: torch.Size) -> LinearOperator:
        return self._dense()._expand_batch(batch_shape)

    def _permute_batch(self, *dims: int) -> LinearOperator:
        return self._dense()._permute_batch(*dims)

    def _unsqueeze_batch(self, dim: int) -> LinearOperator:
        return self._dense()._unsqueeze_batch(dim)

    def _bilinear_derivative(self, left_vecs: Tensor, right_vecs: Tensor) -> tuple[Tensor | None, ...]:
        r""":math:`\partial\,\mathrm{tr}(U^\top A V)` (:math:`A` this operator) with respect to the inputs and the
        parameters.

        linear_operator's default differentiates a copy of the operator built from detached copies of its
        representation, which ``feature_fn`` (reading the kernel's own parameters) would not use; here the root is
        formed from the representation's own tensors, the same as the kernel's parameters."""
        args = self.representation()
        wanted = [arg for arg in args if arg.requires_grad]
        if not wanted:
            return (None,) * len(args)
        with torch.enable_grad():
            loss = (left_vecs * (self._oriented(self._formed()) @ right_vecs)).sum()
            grads = iter(torch.autograd.grad(loss, wanted, allow_unused=True))
        return tuple(next(grads) if arg.requires_grad else None for arg in args)

    def _diagonal(self) -> Tensor:
        return self.to_dense().diagonal(dim1=-2, dim2=-1)
