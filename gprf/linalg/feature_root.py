r"""The hand-off from a feature kernel to everything downstream: a covariance with a feature root.

Every gprf feature kernel evaluates :math:`K(X, X)` to a
:class:`~gprf.linalg.FeatureRootLinearOperator`, and every consumer — the marginal likelihood, the prediction
strategies, streaming and BoTorch — reads it back as one :class:`FeatureRoot` through
:func:`gprf.linalg.feature_root` (the one decoder).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from torch import Tensor

from gprf.linalg.capacitance import CapacitanceFactor, factor_capacitance


@dataclass(frozen=True)
class FeatureRoot:
    r""":math:`K = s\,RR^\top\,(+\,\Sigma)`: a real feature root, its amplitude kept apart, and what came with it.

    Attributes:
        features: The real root :math:`R` ``(*batch, N, F)`` in the model dtype, without the amplitude.
        outputscale: :math:`s` ``(*batch)``, the ``ScaleKernel`` outputscale (or any positive constant the
            covariance was multiplied by), or ``None`` for :math:`s = 1`. Kept apart so that no scaled
            :math:`N\times F` copy of the root is made: it enters the factorisation as :math:`\Sigma/s`.
        noise: The noise variances :math:`\Sigma` ``(*batch, N)``, or ``(*batch, 1)`` for one per batch member,
            when the covariance includes a Gaussian likelihood's noise; ``None`` otherwise.
        inputs: The scaled inputs :math:`Z` ``(*batch, N, d)`` the features were computed from, for kernels whose
            predictions re-centre the features (localized prediction); ``None`` otherwise.
        recentred_features: With ``inputs``, the map :math:`(Z, c) \mapsto R_c(Z)` giving the root of the same
            features expanded about the centre :math:`c` (so that :math:`R = R_{c_0}(Z)` for the map's own centre).
        versions: The draw versions of the feature maps behind :math:`R`, so caches built on earlier draws can
            tell that the features changed (``resample_features``, ``load_state_dict``).
    """

    features: Tensor
    outputscale: Tensor | None = None
    noise: Tensor | None = None
    inputs: Tensor | None = None
    recentred_features: Callable[[Tensor, Tensor], Tensor] | None = None
    versions: tuple[int, ...] = ()

    @property
    def num_points(self) -> int:
        return self.features.size(-2)

    @property
    def num_columns(self) -> int:
        """Columns :math:`F` of the root (the size of the capacitance)."""
        return self.features.size(-1)

    @property
    def amplitude(self) -> Tensor | None:
        r""":math:`\sqrt s` shaped ``(*batch, 1, 1)`` to scale roots, or ``None``."""
        return None if self.outputscale is None else self.outputscale.sqrt().unsqueeze(-1).unsqueeze(-1)

    def scaled_features(self) -> Tensor:
        r""":math:`\sqrt s\,R`: a scaled copy, for consumers that evaluate or concatenate the root itself."""
        amplitude = self.amplitude
        return self.features if amplitude is None else self.features * amplitude

    def with_noise(self, noise: Tensor | None) -> FeatureRoot:
        return replace(self, noise=noise)

    def factor(
        self, rhs: Tensor | None = None, features: Tensor | None = None
    ) -> tuple[CapacitanceFactor, Tensor | None]:
        r"""The capacitance :math:`C = I + s\,\Phi^H\Sigma^{-1}\Phi` factored, and :math:`\sqrt s\,\Phi^H\Sigma^{-1}\,
        \text{rhs}` (see :func:`gprf.linalg.factor_capacitance`).

        :math:`\Phi` is :attr:`features` unless other ``features`` of the same rows are given (e.g. the root cast
        to the factor dtype, or the complex features behind a real root). Needs :attr:`noise`.
        """
        if self.noise is None:
            raise ValueError("Factoring a feature root needs its noise variances (a covariance with a likelihood).")
        phi = self.features if features is None else features
        noise = self.noise.to(phi.real.dtype)
        outputscale = None if self.outputscale is None else self.outputscale.to(phi.real.dtype)
        return factor_capacitance(phi, noise, rhs, outputscale)
