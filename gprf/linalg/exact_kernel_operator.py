r"""An exact kernel matrix evaluated in row blocks: matrix products in :math:`O(N\cdot\text{block})` memory."""

from __future__ import annotations

from collections.abc import Callable

import torch
from linear_operator.operators import DiagLinearOperator, KernelLinearOperator, LinearOperator
from torch import Tensor

from gprf.linalg.feature_root_operator import FeatureRootLinearOperator
from gprf.linalg.preconditioned_added_diag_operator import PreconditionedAddedDiagLinearOperator, warn_dense

#: Entries of one row block of the kernel matrix (a block of :math:`2^{24}` entries is 64 MB in float32).
BLOCK_ENTRIES = 2**24
#: Entries of one row block of the backward pass on a CPU, whatever ``block_rows``: autograd through the kernel makes
#: several temporaries of a block's size, which stay in the cache at this size (8 MB in float32). At 10,800 kin40k
#: rows one backward pass took 5.5 s with the matrix whole, 2.9 s in blocks of 512 rows, 1.9 s of 256 and 2.1 s of
#: 128 (one thread). On a GPU the operator's own blocks are kept: fewer, larger kernels suit it.
CPU_BACKWARD_BLOCK_ENTRIES = 2**21


class ExactKernelLinearOperator(KernelLinearOperator):
    r"""The matrix :math:`K_{ij} = k_\theta(x^{(1)}_i, x^{(2)}_j)` of an exact kernel, never formed when it is large.

    linear_operator's :class:`~linear_operator.operators.KernelLinearOperator` (the operator of GPyTorch's KeOps
    kernels: inputs and hyperparameters as its representation, so it is rebuilt, sliced, batched and transposed
    lazily), with the products computed the way GPyTorch's partitioned and KeOps kernels compute them:

    * the products (``_matmul``) evaluate ``block_rows`` rows of :math:`K` at a time and multiply each block, memory
      :math:`O(\text{block}\cdot N_2)` instead of :math:`O(N_1N_2)`; a matrix that fits in one block is evaluated
      once and kept (linear_operator's ``covar_mat``), as GPyTorch keeps a dense kernel matrix;
    * the backward pass of conjugate gradients, solves and products (``_bilinear_derivative``) recomputes each block
      under autograd and accumulates :math:`\partial\,\mathrm{tr}(U^\top KV)/\partial\theta` block by block, so
      the exact marginal likelihood trains through conjugate gradients in the same memory.

    ``covar_func(x1, x2, diag=False, **params)`` evaluates the kernel on given inputs and hyperparameter tensors (it
    must not close over the hyperparameters). For a training covariance, ``preconditioner_covariance(x)`` gives the
    covariance of a low-rank approximation of the same kernel (a :class:`~gprf.linalg.FeatureRootLinearOperator`
    of random features or Nyström points, differentiable in the hyperparameters): adding a diagonal noise then gives a
    :class:`~gprf.linalg.PreconditionedAddedDiagLinearOperator`, whose conjugate gradients it preconditions.

    Args:
        x1, x2: Inputs ``(*batch, N1, d)`` and ``(*batch, N2, d)``.
        covar_func: The kernel function (see above).
        num_outputs_per_input, num_nonbatch_dimensions: As in ``KernelLinearOperator`` (one output per input).
        preconditioner_covariance: See above; ``None`` for cross-covariances.
        block_rows: Rows per block; ``None``: :data:`~gprf.linalg.exact_kernel_operator.BLOCK_ENTRIES` entries per
            block.
        params: The hyperparameter tensors ``covar_func`` takes.
    """

    def __init__(
        self,
        x1: Tensor,
        x2: Tensor,
        covar_func: Callable[..., Tensor],
        num_outputs_per_input: tuple[int, int] = (1, 1),
        num_nonbatch_dimensions: dict[str, int] | None = None,
        *,
        preconditioner_covariance: Callable[[Tensor], FeatureRootLinearOperator] | None = None,
        block_rows: int | None = None,
        **params: Tensor,
    ) -> None:
        super().__init__(
            x1,
            x2,
            covar_func,
            num_outputs_per_input,
            num_nonbatch_dimensions,
            preconditioner_covariance=preconditioner_covariance,
            block_rows=block_rows,
            **params,
        )
        # Recorded above for linear_operator's rebuilds (representation trees, detach), but not arguments of the
        # kernel function; KernelLinearOperator's own slices and transposes rebuild without them, so a slice of a
        # training covariance is not taken for one.
        self.nontensor_params.pop("preconditioner_covariance")
        self.nontensor_params.pop("block_rows")
        self.preconditioner_covariance = preconditioner_covariance
        self.block_rows = block_rows

    # ------------------------------------------------------------------ evaluation
    def _rows_per_block(self) -> int:
        if self.block_rows is not None:
            return self.block_rows
        entries_per_row = self.batch_shape.numel() * self.size(-1)
        return max(1, BLOCK_ENTRIES // max(entries_per_row, 1))

    def _backward_rows_per_block(self) -> int:
        rows = self._rows_per_block()
        if self.x1.device.type != "cpu":
            return rows
        entries_per_row = self.batch_shape.numel() * self.size(-1)
        return min(rows, max(1, CPU_BACKWARD_BLOCK_ENTRIES // max(entries_per_row, 1)))

    def _evaluate(self, rows: slice | None = None, diag: bool = False) -> Tensor:
        x1 = self.x1 if rows is None else self.x1[..., rows, :]
        return self.covar_func(x1, self.x2, diag=diag, **self.tensor_params)

    def _diagonal(self) -> Tensor:
        return self._evaluate(diag=True)

    def to_dense(self) -> Tensor:
        if self.preconditioner_covariance is not None:
            warn_dense(self.size(-1))
        return self._evaluate()

    def _matmul(self, rhs: Tensor) -> Tensor:
        if torch.is_grad_enabled() and self.requires_grad:
            # A direct call under autograd (e.g. another operator's default backward): through linear_operator's
            # product, whose backward is the blockwise _bilinear_derivative below, so no N x N graph is kept.
            return self.matmul(rhs)
        is_vector = rhs.dim() == 1
        rhs = rhs.unsqueeze(-1) if is_vector else rhs
        rows = self._rows_per_block()
        if self.size(-2) <= rows:
            result = self.covar_mat @ rhs
        else:
            blocks = [self._evaluate(slice(start, start + rows)) @ rhs for start in range(0, self.size(-2), rows)]
            result = torch.cat(blocks, dim=-2)
        return result.squeeze(-1) if is_vector else result

    def _bilinear_derivative(self, left_vecs: Tensor, right_vecs: Tensor) -> tuple[Tensor | None, ...]:
        r""":math:`\partial\,\mathrm{tr}(U^\top K V)/\partial` (inputs, hyperparameters), one row block at a time."""
        args = [arg.detach().requires_grad_(arg.requires_grad) for arg in self.representation()]
        wanted = [arg for arg in args if arg.requires_grad]
        if not wanted:
            return (None,) * len(args)
        operator = self.representation_tree()(*args)
        rows = self._backward_rows_per_block()
        totals: list[Tensor | None] = [None] * len(wanted)
        with torch.enable_grad():
            for start in range(0, self.size(-2), rows):
                block = operator._evaluate(slice(start, start + rows))
                loss = (left_vecs[..., start : start + rows, :] * (block @ right_vecs)).sum()
                grads = torch.autograd.grad(loss, wanted, allow_unused=True)
                totals = [
                    total if grad is None else grad if total is None else total + grad
                    for total, grad in zip(totals, grads, strict=True)
                ]
        by_arg = iter(totals)
        return tuple(next(by_arg) if arg.requires_grad else None for arg in args)

    # ------------------------------------------------------------------ adding the noise
    def add_diagonal(self, diag: Tensor) -> LinearOperator:
        added = super().add_diagonal(diag)
        return self._preconditioned(added._diag_tensor) if self.preconditioner_covariance is not None else added

    def __add__(self, other):
        if isinstance(other, DiagLinearOperator) and self.preconditioner_covariance is not None:
            return self._preconditioned(other)
        return super().__add__(other)

    def _preconditioned(self, diag: DiagLinearOperator) -> PreconditionedAddedDiagLinearOperator:
        return PreconditionedAddedDiagLinearOperator(self, diag)
