r"""A preconditioner :math:`P = \Sigma + s\,\Phi\Phi^\top` for an exact kernel's training covariance, from a feature
root of the same kernel.

For the training covariance :math:`\hat K = sK + \Sigma` of an exact kernel (never formed for large :math:`N`) and a
feature root :math:`\Phi` (:math:`N\times F`: random features, Nyström points) of the same kernel and
hyperparameters, :math:`P` is the low-rank model's own training covariance. With the capacitance
:math:`C = I + s\,\Phi^\top\Sigma^{-1}\Phi`
(:func:`gprf.linalg.factor_capacitance`, factored once in :class:`gprf.settings.factor_dtype`),

.. math::
    P^{-1}v = \Sigma^{-1}v - s\,\Sigma^{-1}\Phi\,C^{-1}\Phi^\top\Sigma^{-1}v, \qquad
    \log\det P = \log\det C + \sum_i\log\sigma_i^2,

(Woodbury identity and matrix determinant lemma; for :math:`\Sigma = \sigma^2 I` the latter reads
:math:`(N-F)\log\sigma^2 + \log\det(\sigma^2 I_F + s\,\Phi^\top\Phi)`), each application :math:`O(NF)`. Samples
:math:`z = \Sigma^{1/2}\varepsilon_1 + \sqrt s\,\Phi\varepsilon_2 \sim N(0, P)` are the probe vectors of
preconditioned stochastic Lanczos quadrature, :math:`\log\det\hat K = \log\det P + \log\det(P^{-1/2}\hat K
P^{-1/2})` (Gardner et al., 2018). :math:`P^{-1}\hat K` has its eigenvalues near 1 where the features capture the
kernel's spectrum above :math:`\sigma^2/s`; Avron, Clarkson & Woodruff (2017) tie the number of features a good
preconditioner needs to the kernel's statistical dimension.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from linear_operator.operators import (
    ConstantDiagLinearOperator,
    DiagLinearOperator,
    LinearOperator,
    PsdSumLinearOperator,
)
from torch import Tensor

from gprf.linalg.capacitance import CapacitanceFactor
from gprf.linalg.feature_root import FeatureRoot
from gprf.linalg.feature_root_operator import FeatureRootLinearOperator
from gprf.settings import factor_dtype


@dataclass(frozen=True)
class FeatureRootPreconditioner:
    r""":math:`P = \Sigma + s\,\Phi\Phi^\top` from a :class:`~gprf.linalg.FeatureRoot` with noise, and its factored
    capacitance.

    Build it with :meth:`from_root`. Everything is differentiable in the root, amplitude and noise (the
    variance-reduced gradient of Wenger et al., 2022, differentiates :math:`\log\det P`); :meth:`detached` gives the
    copy that conjugate gradients apply.
    """

    root: FeatureRoot
    factor: CapacitanceFactor

    @classmethod
    def from_root(cls, root: FeatureRoot) -> FeatureRootPreconditioner:
        """Factor the capacitance of ``root`` (which must carry noise variances) once."""
        if root.noise is None:
            raise ValueError(
                "A feature-root preconditioner needs the noise variances of the covariance it preconditions."
            )
        if root.is_lazy:
            root = replace(root, source=root.features)
        factor, _ = root.factor()
        return cls(root, factor)

    def detached(self) -> FeatureRootPreconditioner:
        """The same preconditioner outside the autograd graph."""
        factor = CapacitanceFactor(self.factor.cholesky.detach(), self.factor.updates)
        return FeatureRootPreconditioner(self.root.map_tensors(lambda tensor, _: tensor.detach()), factor)

    @property
    def features(self) -> Tensor:
        r""":math:`\Phi` ``(*batch, N, F)``."""
        return self.root.features

    def _noise_column(self, dtype: torch.dtype) -> Tensor:
        """Noise variances shaped ``(*batch, N or 1, 1)`` to scale right-hand sides."""
        return self.root.noise.to(dtype).unsqueeze(-1)

    def solve(self, rhs: Tensor) -> Tensor:
        r""":math:`P^{-1}\,\text{rhs}` for ``rhs`` ``(..., N, k)``, in the dtype of ``rhs``; :math:`O(NFk)`."""
        features = self.features.to(rhs.dtype)
        weighted = rhs / self._noise_column(rhs.dtype)
        projection = self.root.scale_rows(features.mT @ weighted)
        correction = self.root.scale_rows(self.factor.solve(projection.to(factor_dtype.value())).to(rhs.dtype))
        return weighted - (features @ correction) / self._noise_column(rhs.dtype)

    def logdet(self) -> Tensor:
        r""":math:`\log\det P` ``(*batch)``, in the dtype of the root."""
        noise = self.root.noise.to(self.factor.cholesky.dtype)
        noise_logdet = noise.log().expand(*noise.shape[:-1], self.root.num_points).sum(-1)
        return (self.factor.logdet() + noise_logdet).to(self.root.dtype)

    def operator(self) -> LinearOperator:
        r""":math:`P` as a linear operator whose ``zero_mean_mvn_samples`` draws :math:`\Sigma^{1/2}\varepsilon_1 +
        \sqrt s\,\Phi\varepsilon_2` (:math:`O(NF)` per probe): what linear_operator's stochastic Lanczos quadrature
        asks of a preconditioner, and what it differentiates for the variance-reduced log-determinant gradient."""
        root = self.root
        low_rank = FeatureRootLinearOperator(root.features, outputscale=root.outputscale)
        noise = root.noise
        if noise.size(-1) == 1 and root.num_points > 1:
            diagonal = ConstantDiagLinearOperator(noise, diag_shape=root.num_points)
        else:
            diagonal = DiagLinearOperator(noise)
        return PsdSumLinearOperator(low_rank, diagonal)

    def weighted_features(self) -> Tensor:
        r""":math:`\Sigma^{-1}\Phi` ``(*batch, N, F)``, whose columns span those of :math:`P^{-1}\Phi` (Woodbury): where
        the preconditioner puts the inverse of the kernel's leading part."""
        return self.features / self._noise_column(self.features.dtype)
