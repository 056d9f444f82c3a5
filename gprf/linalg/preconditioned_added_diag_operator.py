r"""The training covariance :math:`\hat K = K + \Sigma` of an exact kernel, preconditioned by a feature root (random
features, Nyström points) of the same kernel in linear_operator's conjugate gradients and stochastic Lanczos
quadrature."""

from __future__ import annotations

import warnings
from collections.abc import Callable

from linear_operator import settings
from linear_operator.operators import AddedDiagLinearOperator, DiagLinearOperator, LinearOperator
from torch import Tensor

from gprf.exceptions import DenseCovarianceWarning
from gprf.linalg.cholesky_terms import cholesky_inv_quad_logdet
from gprf.linalg.feature_root_preconditioner import FeatureRootPreconditioner


def warn_dense(num_points: int) -> None:
    """Warn that an exact kernel's training covariance of ``num_points`` points is being formed, when GPyTorch
    would not form it itself (above linear_operator's ``max_cholesky_size``)."""
    if num_points > settings.max_cholesky_size.value():
        warnings.warn(
            f"Forming the dense {num_points} x {num_points} training covariance of a PreconditionedKernel (O(N^2) "
            "memory, O(N^3) factorisation): linear_operator's fast_computations are off (BoTorch switches them off "
            "on import) and GPyTorch's MultivariateNormal factors the matrix. Return "
            "gprf.distributions.MultivariateNormal from the model's forward to keep preconditioned conjugate "
            "gradients.",
            DenseCovarianceWarning,
            stacklevel=3,
        )


class RandomFeaturePreconditioning:
    r"""The ``preconditioner_override`` of one :class:`PreconditionedAddedDiagLinearOperator`: builds its
    :class:`~gprf.linalg.FeatureRootPreconditioner` on first use and keeps it.

    linear_operator rebuilds an operator from its parts for every solve and every backward pass (keeping this
    object), so one evaluation of the covariance — one hyperparameter value, one draw of the features — factors its
    preconditioner once; a new evaluation (after an optimiser step, ``resample_features`` or a new likelihood noise)
    builds a new one.
    """

    def __init__(self) -> None:
        self._built: tuple[tuple, FeatureRootPreconditioner] | None = None

    def preconditioner(self, covariance: PreconditionedAddedDiagLinearOperator) -> FeatureRootPreconditioner:
        key = (covariance.dtype, covariance.device, covariance.shape)
        if self._built is None or self._built[0] != key:
            kernel = covariance._linear_op
            features = kernel.preconditioner_covariance(kernel.x1)
            root = (features + covariance._diag_tensor).feature_root  # the low-rank model's covariance
            self._built = (key, FeatureRootPreconditioner.from_root(root))
        return self._built[1]

    def __call__(
        self, covariance: PreconditionedAddedDiagLinearOperator
    ) -> tuple[Callable[[Tensor], Tensor], LinearOperator, Tensor]:
        """What linear_operator's ``_preconditioner`` returns: :math:`v\\mapsto P^{-1}v`, :math:`P` and
        :math:`\\log\\det P`."""
        preconditioner = self.preconditioner(covariance)
        return preconditioner.detached().solve, preconditioner.operator(), preconditioner.logdet()


class PreconditionedAddedDiagLinearOperator(AddedDiagLinearOperator):
    r""":math:`\hat K = K + \Sigma`: an exact kernel matrix (:class:`~gprf.linalg.ExactKernelLinearOperator`) plus a
    Gaussian likelihood's noise, whose preconditioner is :math:`P = \Sigma + s\,\Phi\Phi^\top` from a feature root
    :math:`\Phi` of the same kernel (random features or Nyström points;
    :class:`~gprf.linalg.FeatureRootPreconditioner`).

    Plugs into linear_operator through ``AddedDiagLinearOperator``'s ``preconditioner_override``, in place of the
    rank-15 pivoted Cholesky (Gardner et al., 2018): above ``max_cholesky_size`` the marginal likelihood
    (``inv_quad_logdet``), solves and their backward passes run conjugate gradients preconditioned by :math:`P`, with
    stochastic Lanczos quadrature probes :math:`z\sim N(0, P)` and the variance-reduced log-determinant gradient of
    Wenger et al. (2022). At or below it (or with linear_operator's fast ``log_prob`` off) the marginal likelihood
    factors :math:`\hat K` by Cholesky, with the closed-form backward pass of
    :func:`~gprf.linalg.cholesky_inv_quad_logdet` (a third to a fifth of autograd's
    through the factor: the steps of ``fit_mll``'s exact subsample start take it).
    """

    def __init__(self, *linear_ops, preconditioner_override: RandomFeaturePreconditioning | None = None) -> None:
        override = RandomFeaturePreconditioning() if preconditioner_override is None else preconditioner_override
        super().__init__(*linear_ops, preconditioner_override=override)

    @property
    def preconditioner(self) -> FeatureRootPreconditioner:
        """The preconditioner :math:`P` of this covariance (built once)."""
        return self.preconditioner_override.preconditioner(self)

    def inv_quad_logdet(self, inv_quad_rhs=None, logdet=False, reduce_inv_quad=True):
        if settings.fast_computations.log_prob.on() and self.size(-1) > settings.max_cholesky_size.value():
            return super().inv_quad_logdet(inv_quad_rhs, logdet, reduce_inv_quad)
        return cholesky_inv_quad_logdet(self.to_dense(), inv_quad_rhs, logdet, reduce_inv_quad)

    def evaluate_kernel(self) -> PreconditionedAddedDiagLinearOperator:
        return self  # its parts are evaluated; rebuilding would drop the preconditioner already built

    def add_diagonal(self, diag: Tensor) -> PreconditionedAddedDiagLinearOperator:
        return PreconditionedAddedDiagLinearOperator(self._linear_op, self._diag_tensor.add_diagonal(diag))

    def __add__(self, other):
        if isinstance(other, DiagLinearOperator):
            return PreconditionedAddedDiagLinearOperator(self._linear_op, self._diag_tensor + other)
        # Anything else added to the kernel leaves the kernel whose features precondition it.
        return AddedDiagLinearOperator(self._linear_op + other, self._diag_tensor)
