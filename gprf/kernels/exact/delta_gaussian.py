r"""The exact delta-Gaussian kernel, a weighted sum of Gaussians that is indefinite for negative weights."""

from __future__ import annotations

from gpytorch.kernels import Kernel
from torch import Tensor

from gprf.features import DeltaGaussianSpectrum
from gprf.linalg import IndefiniteDenseLinearOperator


class DeltaGaussianKernel(Kernel):
    r"""Exact delta-Gaussian kernel :math:`k(x, y) = \sum_i a_i \exp(-\lVert x - y\rVert^2 / 2\sigma_i^2\ell^2)`.

    Indefinite when some :math:`a_i < 0` (Luo et al. 2021, eq. 19); the mixture weights :math:`a_i` and relative
    scales :math:`\sigma_i` are fixed, the (ARD) lengthscale :math:`\ell` is a hyperparameter. Evaluations are
    :class:`~gprf.linalg.IndefiniteDenseLinearOperator`: usable for kernel ridge regression,
    PSD operations raise.

    Reference: Q. Luo, K. Fang, J. Yang, X. Huang. *Towards Unbiased Random Features with Lower Variance for
    Stationary Indefinite Kernels.* International Joint Conference on Neural Networks (IJCNN), 2021.
    """

    has_lengthscale = True

    def __init__(self, weights, lengthscales, **kwargs) -> None:
        super().__init__(**kwargs)
        self.spectrum = DeltaGaussianSpectrum(weights, lengthscales)

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, last_dim_is_batch: bool = False, **params):
        squared = self.covar_dist(x1 / self.lengthscale, x2 / self.lengthscale, diag=diag, square_dist=True)
        values = self.spectrum.profile_sq(squared)
        return values if diag else IndefiniteDenseLinearOperator(values)
