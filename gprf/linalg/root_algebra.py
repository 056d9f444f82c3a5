r"""Sums and elementwise products of feature-root covariances, as GPyTorch's ``AdditiveKernel`` and ``ProductKernel``
form them from their parts' covariances.

* Sum: :math:`s_1R_1R_1^\top + s_2R_2R_2^\top = RR^\top` with the concatenated root
  :math:`R = [\sqrt{s_1}R_1, \sqrt{s_2}R_2]` (:func:`sum_roots`), each part with its own amplitude.
* Product with an exact root (a task covariance :math:`LL^\top`, or any root without random draws):
  :math:`(s_1R_1R_1^\top)\circ(LL^\top) = s_1(R_1\odot L)(R_1\odot L)^\top` with the row-wise Kronecker product
  :func:`kronecker_rows` (:func:`kronecker_product`), exact.
* Product of two random roots: the product kernel's own features, which only the kernels behind the roots know (the
  pairing of their columns, independent draws); the kernel layer registers that rule (:func:`register_root_product`).

GPyTorch's ``IndexKernel`` evaluates to ``B`` interpolated at the task indices; :func:`task_rows` reads it back as rows
of an exact root of ``B``. A root that is not formed (:class:`~gprf.linalg.LazyFeatures`) stays lazy through sums and
products (:func:`joined`), so the marginal likelihood still sums over row chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from linear_operator.operators import DenseLinearOperator, InterpolatedLinearOperator, LinearOperator
from linear_operator.utils.cholesky import psd_safe_cholesky
from torch import Tensor

from gprf.linalg.feature_root import FeatureRoot
from gprf.linalg.lazy_features import LazyFeatures
from gprf.settings import factor_dtype

Source = Tensor | LazyFeatures


def kronecker_rows(left: Tensor, right: Tensor) -> Tensor:
    r"""Row-wise Kronecker (Khatri–Rao) product: row :math:`n` is :math:`a_n\otimes b_n`, column
    :math:`(p, q) \mapsto pF_b + q`, so that :math:`(A\odot B)(A\odot B)^\top = AA^\top \circ BB^\top`."""
    batch_shape = torch.broadcast_shapes(left.shape[:-2], right.shape[:-2])
    product = left.unsqueeze(-1) * right.unsqueeze(-2)
    return product.expand(*batch_shape, *product.shape[-3:]).reshape(*batch_shape, left.size(-2), -1)


def joined(
    sources: Sequence[Source], combine: Callable[[list[Tensor]], Tensor], params: Sequence[Tensor | None] = ()
) -> Source:
    r"""``combine`` of the roots ``sources`` (of the same rows), row by row: formed when every source is, else a
    :class:`~gprf.linalg.LazyFeatures` over the sources' inputs side by side (a formed source enters as its own
    rows), differentiable in the sources' parameters and ``params`` (tensors ``combine`` reads)."""
    if not any(isinstance(source, LazyFeatures) for source in sources):
        return combine(list(sources))
    parts = [(s.inputs, s.feature_fn, s.params) if isinstance(s, LazyFeatures) else (s, None, ()) for s in sources]
    batch_shape = torch.broadcast_shapes(*(inputs.shape[:-2] for inputs, _, _ in parts))
    dtype = parts[0][0].dtype
    for inputs, _, _ in parts[1:]:
        dtype = torch.promote_types(dtype, inputs.dtype)
    widths = [inputs.size(-1) for inputs, _, _ in parts]
    dtypes = [inputs.dtype for inputs, _, _ in parts]
    functions = [function for _, function, _ in parts]

    def feature_fn(rows: Tensor) -> Tensor:
        pieces = rows.split(widths, dim=-1)
        return combine(
            [
                piece.to(piece_dtype) if function is None else function(piece.to(piece_dtype))
                for piece, piece_dtype, function in zip(pieces, dtypes, functions, strict=True)
            ]
        )

    inputs = torch.cat([inputs.to(dtype).expand(*batch_shape, *inputs.shape[-2:]) for inputs, _, _ in parts], dim=-1)
    chunk_size = min(s.chunk_size for s in sources if isinstance(s, LazyFeatures))
    all_params = [param for _, _, part_params in parts for param in part_params]
    all_params += [param for param in params if param is not None and param.requires_grad]
    return LazyFeatures(inputs, feature_fn, chunk_size, all_params)


def sum_roots(first: FeatureRoot, second: FeatureRoot) -> FeatureRoot:
    r"""The hand-off of :math:`s_1R_1R_1^\top + s_2R_2R_2^\top`: root :math:`[\sqrt{s_1}R_1, \sqrt{s_2}R_2]`, no
    amplitude, the draw versions of both (neither may carry noise)."""
    if first.noise is not None or second.noise is not None:
        raise ValueError("sum_roots adds covariances without noise; add the noise once, to the sum.")
    outputscales = [first.outputscale, second.outputscale]

    def concatenate(roots: list[Tensor]) -> Tensor:
        # The amplitudes are taken here, so that a lazy root recomputing its chunks differentiates them afresh.
        scaled = [
            root if outputscale is None else root * outputscale.sqrt().unsqueeze(-1).unsqueeze(-1)
            for root, outputscale in zip(roots, outputscales, strict=True)
        ]
        batch_shape = torch.broadcast_shapes(*(root.shape[:-2] for root in scaled))
        return torch.cat([root.expand(*batch_shape, *root.shape[-2:]) for root in scaled], dim=-1)

    source = joined([first.source, second.source], concatenate, outputscales)
    return FeatureRoot(source, versions=first.versions + second.versions)


def product_outputscale(first: FeatureRoot, second: FeatureRoot) -> Tensor | None:
    """:math:`s_1 s_2` of a product of two hand-offs (``None`` for unit amplitudes)."""
    if first.outputscale is None:
        return second.outputscale
    if second.outputscale is None:
        return first.outputscale
    return first.outputscale * second.outputscale


def kronecker_product(first: FeatureRoot, second: FeatureRoot | Tensor) -> FeatureRoot:
    r"""The hand-off of :math:`(s_1R_1R_1^\top)\circ(s_2R_2R_2^\top)` with the exact root :math:`R_1\odot R_2`
    (:func:`kronecker_rows`) and amplitude :math:`s_1s_2`; ``second`` may be the rows of an exact root
    (:func:`task_rows`)."""
    if not isinstance(second, FeatureRoot):
        second = FeatureRoot(second)
    source = joined([first.source, second.source], lambda roots: kronecker_rows(*roots))
    outputscale = product_outputscale(first, second)
    return FeatureRoot(source, outputscale=outputscale, versions=first.versions + second.versions)


def task_rows(covariance: LinearOperator) -> Tensor | None:
    r"""Rows :math:`w_nL_{t_n}` of an exact root of a task covariance, or ``None`` for other covariances.

    GPyTorch's ``IndexKernel`` (and BoTorch's ``PositiveIndexKernel``) evaluates :math:`K_{nm} = B_{t_nt_m}` as
    ``B`` interpolated at the task indices :math:`t` of the rows (one index per row, weights :math:`w`, the same on
    both sides for a square covariance). With :math:`B = LL^\top` (Cholesky, in the factor dtype) the rows
    :math:`w_nL_{t_n}` are an exact root with :math:`T` columns.
    """
    if not isinstance(covariance, InterpolatedLinearOperator) or covariance.left_interp_indices.size(-1) != 1:
        return None
    if not same_tensor(covariance.left_interp_indices, covariance.right_interp_indices):
        return None
    if not same_tensor(covariance.left_interp_values, covariance.right_interp_values):
        return None
    base = covariance.base_linear_op
    if not isinstance(base, DenseLinearOperator):
        return None
    matrix = base.to_dense()
    root = psd_safe_cholesky(matrix.to(factor_dtype.value())).to(matrix.dtype)
    indices, weights = covariance.left_interp_indices, covariance.left_interp_values
    batch_shape = torch.broadcast_shapes(root.shape[:-2], indices.shape[:-2])
    root = root.expand(*batch_shape, *root.shape[-2:])
    index = indices.expand(*batch_shape, *indices.shape[-2:])  # (*batch, N, 1)
    rows = root.gather(-2, index.expand(*index.shape[:-1], root.size(-1)))
    return rows * weights.expand(*batch_shape, *weights.shape[-2:]).to(rows.dtype)


def same_tensor(first: Tensor, second: Tensor) -> bool:
    """Whether ``first`` and ``second`` hold the same values.

    GPyTorch passes the same tensor (or equal views of one storage) for square covariances, which is recognised
    without a host synchronisation; only distinct tensors of equal shape are compared.
    """
    if first is second:
        return True
    if first.shape != second.shape:
        return False
    if first.data_ptr() == second.data_ptr() and first.stride() == second.stride():
        return True
    return torch.equal(first, second)


# Products of two random roots are the product kernel's own features: the kernel layer registers the rule (it reads
# the kernels behind the roots), so that this module never imports the kernels.
RootProductRule = Callable[[Any, Any], Any]
_root_product_rules: list[RootProductRule] = []


def register_root_product(rule: RootProductRule) -> None:
    """Add ``rule(first, second)``: the product of two :class:`~gprf.linalg.FeatureRootLinearOperator` as one, or
    ``None`` when the rule does not know their roots (the next rule, then the exact product, is tried)."""
    _root_product_rules.append(rule)


def registered_root_product(first: Any, second: Any) -> Any:
    """The first registered rule's product of two feature-root operators, or ``None``."""
    for rule in _root_product_rules:
        product = rule(first, second)
        if product is not None:
            return product
    return None
