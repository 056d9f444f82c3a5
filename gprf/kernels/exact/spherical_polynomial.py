r"""The exact polynomial kernel on the unit sphere, indefinite in general."""

from __future__ import annotations

import copy

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from gprf.features import check_unit_norm
from gprf.linalg import IndefiniteDenseLinearOperator


class SphericalPolynomialKernel(Kernel):
    r"""Exact polynomial kernel on the unit sphere, :math:`k(x, y) = (1 - \lVert x - y\rVert^2/a^2)^p
    = ((1 - 2/a^2) + (2/a^2)\,x^\top y)^p` (Luo et al. 2021, eq. 17).

    Inputs must have unit norm (rows are checked where :class:`gprf.settings.validate_inputs` applies, with a
    ``ValueError`` asking to normalise them); there is no lengthscale. Evaluations are
    :class:`~gprf.linalg.IndefiniteDenseLinearOperator`.

    Reference: Q. Luo, K. Fang, J. Yang, X. Huang. *Towards Unbiased Random Features with Lower Variance for
    Stationary Indefinite Kernels.* International Joint Conference on Neural Networks (IJCNN), 2021.
    """

    def __init__(self, a: float, degree: int, **kwargs) -> None:
        super().__init__(**kwargs)
        if not a > 0:
            raise ValueError(f"a must be positive, got {a!r}.")
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 0:
            raise ValueError(f"degree must be a non-negative integer, got {degree!r}.")
        self.a, self.degree = float(a), degree

    def __getitem__(self, index) -> Kernel:
        # GPyTorch's Kernel.__getitem__ reads the new batch shape off the indexed parameters; this kernel has none.
        if len(self.batch_shape) == 0:
            return self
        new_kernel = copy.deepcopy(self)
        new_kernel.batch_shape = torch.empty(self.batch_shape, device="meta")[index].shape
        return new_kernel

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params):
        for x in (x1, x2):
            check_unit_norm(x, type(self).__name__)
        squared = self.covar_dist(x1, x2, diag=diag, square_dist=True)
        values = (1.0 - squared / self.a**2).pow(self.degree)
        # No hyperparameter carries the batch shape here: expand to it, as GPyTorch expects of a batched kernel.
        batch_shape = torch.broadcast_shapes(values.shape[: -1 if diag else -2], self.batch_shape)
        values = values.expand(*batch_shape, *values.shape[-1 if diag else -2 :])
        return values if diag else IndefiniteDenseLinearOperator(values)
