r"""The exact low-rank root of a task covariance (GPyTorch's ``IndexKernel``, BoTorch's ``PositiveIndexKernel``), as a
feature kernel whose product with a data kernel is a root of the intrinsic coregionalisation (ICM) kernel."""

from __future__ import annotations

import torch
from gpytorch.kernels import IndexKernel, Kernel
from torch import Tensor

from gprf.kernels.feature_kernel import FeatureKernel


def is_positive_index_kernel(kernel: IndexKernel) -> bool:
    """Whether ``kernel`` is BoTorch's ``PositiveIndexKernel`` (recognised by its attributes: gprf's kernels never
    import BoTorch)."""
    return hasattr(kernel, "unit_scale_for_target") and hasattr(kernel, "target_task_index")


class IndexRootKernel(FeatureKernel):
    r"""Task kernel :math:`k(i, j) = B_{ij}` with its exact root: :math:`B = WW^\top + \mathrm{diag}(v) = LL^\top`,
    :math:`L = [W, \mathrm{diag}(\sqrt v)]` (:math:`T\times(r + T)` for :math:`T` tasks of rank :math:`r`), and
    the root of an input row with task index :math:`t` is row :math:`t` of :math:`L`.

    Holds the ``IndexKernel`` module itself, so its parameters, constraints and priors are the same objects
    (training either trains both) and :meth:`exact` returns it. BoTorch's ``PositiveIndexKernel``
    (:math:`B = (CC^\top + \mathrm{diag}(v))/n`, normalised to a unit variance :math:`n` of the target task when
    ``unit_scale_for_target``) has the root :math:`[C, \mathrm{diag}(\sqrt v)]/\sqrt n`.

    The product ``data_kernel * IndexRootKernel(task_kernel)`` (the exact Kronecker product,
    :class:`~gprf.kernels.FeatureProductKernel`) is a root of the ICM kernel
    :math:`k((x, i), (y, j)) = k_{\mathrm{data}}(x, y)B_{ij}` with :math:`F_{\mathrm{data}}(r + T)` columns; a gprf
    data kernel times an ``IndexKernel`` builds it (which is what BoTorch's ``MultiTaskGP`` does with a gprf
    ``covar_module``).

    The inputs are the task column (``active_dims`` of the task kernel, taken over at construction) holding task
    indices :math:`0, \ldots, T-1` as floats.

    Args:
        index_kernel: A GPyTorch ``IndexKernel`` or BoTorch ``PositiveIndexKernel``.
    """

    def __init__(self, index_kernel: IndexKernel) -> None:
        if not isinstance(index_kernel, IndexKernel) or (
            type(index_kernel) is not IndexKernel and not is_positive_index_kernel(index_kernel)
        ):
            raise TypeError(
                f"IndexRootKernel needs a GPyTorch IndexKernel or BoTorch PositiveIndexKernel, got "
                f"{type(index_kernel).__name__}; other task kernels have no known low-rank root."
            )
        super().__init__(batch_shape=index_kernel.batch_shape, active_dims=index_kernel.active_dims)
        self.index_kernel = index_kernel

    @property
    def num_tasks(self) -> int:
        return self.index_kernel.raw_var.size(-1)

    @property
    def rank(self) -> int:
        return self.index_kernel.covar_factor.size(-1)

    @property
    def root_dim(self) -> int:
        return self.rank + self.num_tasks

    def task_root(self) -> Tensor:
        r""":math:`L` ``(*batch, T, r + T)`` with :math:`LL^\top` the task covariance matrix."""
        kernel = self.index_kernel
        factor, var = kernel.covar_factor, kernel.var
        root = torch.cat([factor, torch.diag_embed(var.sqrt())], dim=-1)
        if is_positive_index_kernel(kernel) and kernel.unit_scale_for_target:
            target = root[..., kernel.target_task_index, :]
            root = root / target.square().sum(-1).sqrt().unsqueeze(-1).unsqueeze(-1)
        return root

    def features(self, x: Tensor) -> Tensor:
        """Rows of :meth:`task_root` selected by the task indices in the (single) input column."""
        if x.dim() < 2 or x.size(-1) != 1:
            raise ValueError(
                f"IndexRootKernel reads one column of task indices, got inputs of shape {tuple(x.shape)}; set the "
                "task kernel's active_dims to the task column."
            )
        root = self.task_root()
        batch_shape = torch.broadcast_shapes(root.shape[:-2], x.shape[:-2])
        index = x[..., 0].long().expand(*batch_shape, x.size(-2))
        root = root.expand(*batch_shape, *root.shape[-2:])
        return root.gather(-2, index.unsqueeze(-1).expand(*index.shape, root.size(-1)))

    def exact(self) -> Kernel:
        """The task kernel itself (the root is exact)."""
        return self.index_kernel

    @property
    def dtype(self) -> torch.dtype:
        return self.index_kernel.raw_var.dtype

    @property
    def device(self) -> torch.device:
        return self.index_kernel.raw_var.device

    def __getitem__(self, index) -> Kernel:
        return IndexRootKernel(self.index_kernel[index])

    def expand_batch(self, *sizes) -> Kernel:
        return IndexRootKernel(self.index_kernel.expand_batch(*sizes))
