r"""Exact dot-product kernels with a lengthscale: the targets of polynomial sketches and Maclaurin features."""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from torch import Tensor

from gprf.features.sketches import _check_bias, _check_degree


class DotProductKernel(Kernel):
    r"""Base of kernels :math:`k(x, y) = f(x^\top y/\ell^2)` (ARD: :math:`\sum_j x_jy_j/\ell_j^2`)."""

    has_lengthscale = True

    def _profile(self, dot: Tensor) -> Tensor:
        raise NotImplementedError

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params) -> Tensor:
        if last_dim_is_batch:
            raise NotImplementedError(f"{type(self).__name__} does not support last_dim_is_batch.")
        x1_ = x1 / self.lengthscale
        x2_ = x2 / self.lengthscale
        dot = (x1_ * x2_).sum(-1) if diag else x1_ @ x2_.mT
        return self._profile(dot)


class ScaledPolynomialKernel(DotProductKernel):
    r"""Polynomial kernel with a lengthscale: :math:`k(x, y) = (x^\top y/\ell^2 + c)^p`.

    GPyTorch's :class:`~gpytorch.kernels.PolynomialKernel` has no lengthscale; this one matches
    :class:`~gprf.kernels.PolynomialSketchKernel` (wrap it in ``ScaleKernel`` for an amplitude). With an
    amplitude and a lengthscale, any bias :math:`c > 0` gives the same family
    (:math:`\sigma^2(x^\top y/\ell^2 + c)^p = \sigma^2c^p(x^\top y/(c\ell^2) + 1)^p`), so ``bias`` is a fixed
    constant rather than a hyperparameter.

    Args:
        degree: :math:`p \ge 0`.
        bias: :math:`c \ge 0`.
    """

    def __init__(self, degree: int, bias: float = 0.0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.degree = _check_degree(degree)
        self.bias = _check_bias(bias)

    def _profile(self, dot: Tensor) -> Tensor:
        return (dot + self.bias).pow(self.degree)


class ExponentialDotProductKernel(DotProductKernel):
    r"""Exponential dot-product kernel :math:`k(x, y) = \exp(x^\top y/\ell^2) = \sum_n (x^\top y/\ell^2)^n/n!`.

    Together with :math:`e^{-\lVert x\rVert^2/2\ell^2}e^{-\lVert y\rVert^2/2\ell^2}` it gives the RBF kernel,
    which is how Maclaurin features approximate the Gaussian kernel (Wacker, Kanagawa & Filippone 2024, §5).

    Reference: J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal
    of Machine Learning Research, 2024 (arXiv:2201.08712).
    """

    def _profile(self, dot: Tensor) -> Tensor:
        return torch.exp(dot)
