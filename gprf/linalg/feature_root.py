r"""The hand-off from a feature kernel to everything downstream: a covariance with a feature root.

Every gprf feature kernel evaluates :math:`K(X, X)` to a
:class:`~gprf.linalg.FeatureRootLinearOperator`, and every consumer — the marginal likelihood, the prediction
strategies, streaming and BoTorch — reads it back as one :class:`FeatureRoot` through
:func:`gprf.linalg.feature_root` (the one decoder).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from gprf.linalg.capacitance import CapacitanceFactor, factor_capacitance
from gprf.linalg.lazy_features import LazyFeatures


@dataclass(frozen=True)
class FeatureRoot:
    r""":math:`K = s\,RR^\top\,(+\,\Sigma)`: a real feature root, its amplitude kept apart, and what came with it.

    Attributes:
        source: The real root :math:`R` ``(*batch, N, F)`` in the model dtype, without the amplitude: a tensor, or a
            :class:`~gprf.linalg.LazyFeatures` (large :math:`NF`, see :class:`gprf.settings.feature_chunk_size`)
            that :meth:`factor` sums chunk by chunk and :attr:`features` forms.
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

    source: Tensor | LazyFeatures
    outputscale: Tensor | None = None
    noise: Tensor | None = None
    inputs: Tensor | None = None
    recentred_features: Callable[[Tensor, Tensor], Tensor] | None = None
    versions: tuple[int, ...] = ()

    @property
    def features(self) -> Tensor:
        """The root :math:`R` as a tensor (formed here when the hand-off carries a lazy root)."""
        return self.source.materialize() if isinstance(self.source, LazyFeatures) else self.source

    @property
    def is_lazy(self) -> bool:
        """Whether the root is not formed (:attr:`features` would form it)."""
        return isinstance(self.source, LazyFeatures)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the root."""
        return self.source.dtype

    @property
    def num_points(self) -> int:
        return self.source.shape[-2]

    @property
    def num_columns(self) -> int:
        """Columns :math:`F` of the root (the size of the capacitance)."""
        return self.source.shape[-1]

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

        :math:`\Phi` is the root unless other ``features`` of the same rows are given (e.g. the root cast to the
        factor dtype, or the complex features behind a real root). Needs :attr:`noise`. A lazy root is never
        formed: its sums are accumulated over row chunks.
        """
        if self.noise is None:
            raise ValueError("Factoring a feature root needs its noise variances (a covariance with a likelihood).")
        phi = self.source if features is None else features
        real_dtype = phi.dtype if isinstance(phi, LazyFeatures) else phi.real.dtype
        noise = self.noise.to(real_dtype)
        outputscale = None if self.outputscale is None else self.outputscale.to(real_dtype)
        return factor_capacitance(phi, noise, rhs, outputscale)
