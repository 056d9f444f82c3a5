r"""The hand-off from a feature kernel to everything downstream: a covariance with a feature root.

Every gprf feature kernel evaluates :math:`K(X, X)` to a
:class:`~gprf.linalg.FeatureRootLinearOperator`, and every consumer — the marginal likelihood, the prediction
strategies, streaming and BoTorch — reads it back as one :class:`FeatureRoot` through
:func:`gprf.linalg.feature_root` (the one decoder).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch
from torch import Tensor

from gprf.linalg.capacitance import CapacitanceFactor, capacitance_sums, factor_capacitance
from gprf.linalg.lazy_features import LazyFeatures


def _part(non_batch_dims: int, **field_arguments: Any) -> Any:
    """A tensor part of the hand-off with ``non_batch_dims`` trailing dimensions after the batch ones; the first of
    them, if any, indexes the rows. Batch reshaping and row selection (:meth:`FeatureRoot.map_tensors`,
    :meth:`FeatureRoot.rows`) read this, so a new part is declared here and nowhere else."""
    return field(metadata={"non_batch_dims": non_batch_dims}, **field_arguments)


@dataclass(frozen=True)
class FeatureRoot:
    r""":math:`K = s\,RR^\top\,(+\,\Sigma)`: a real feature root, its amplitude kept apart, and what came with it.

    What every consumer needs of a covariance; constants of one prediction strategy travel through that strategy's
    constructor instead (the kernel's ``prediction_strategy`` hands them over).

    Attributes:
        source: The real root :math:`R` ``(*batch, N, F)`` in the model dtype, without the amplitude: a tensor, or a
            :class:`~gprf.linalg.LazyFeatures` (large :math:`NF`, see :class:`gprf.settings.feature_chunk_size`)
            that :meth:`factor` sums chunk by chunk and :attr:`features` forms.
        outputscale: :math:`s` ``(*batch)``, the ``ScaleKernel`` outputscale (or any positive constant the
            covariance was multiplied by), or ``None`` for :math:`s = 1`. Kept apart so that no scaled
            :math:`N\times F` copy of the root is made: it enters the factorisation as :math:`\Sigma/s`.
        noise: The noise variances :math:`\Sigma` ``(*batch, N)``, or ``(*batch, 1)`` for one per batch member,
            when the covariance includes a Gaussian likelihood's noise; ``None`` otherwise.
        inputs: The inputs :math:`Z` ``(*batch, N, d)`` as the kernel's feature map took them (after ``active_dims``
            and the lengthscales), for consumers that evaluate the map again at the same rows (localized
            prediction re-centres it); ``None`` for kernels that do not attach them.
        versions: The draw versions of the feature maps behind :math:`R`, so caches built on earlier draws can
            tell that the features changed (``resample_features``, ``load_state_dict``).
    """

    source: Tensor | LazyFeatures = _part(2)
    outputscale: Tensor | None = _part(0, default=None)
    noise: Tensor | None = _part(1, default=None)
    inputs: Tensor | None = _part(2, default=None)
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

    def amplitude(self, non_batch_dims: int = 2) -> Tensor | None:
        r""":math:`\sqrt s` shaped ``(*batch, 1, ..., 1)`` with ``non_batch_dims`` ones, to scale values with that many
        dimensions after the batch ones (``0`` gives ``(*batch)``); ``None`` for :math:`s = 1`."""
        if self.outputscale is None:
            return None
        amplitude = self.outputscale.sqrt()
        return amplitude.reshape(amplitude.shape + (1,) * non_batch_dims)

    def scale_rows(self, values: Tensor, non_batch_dims: int = 2) -> Tensor:
        r"""``values`` times :math:`\sqrt s` (``values`` with ``non_batch_dims`` dimensions after the batch ones,
        real or complex, in any dtype: the amplitude is cast to their real dtype); ``values`` itself for
        :math:`s = 1`."""
        amplitude = self.amplitude(non_batch_dims)
        return values if amplitude is None else values * amplitude.to(values.real.dtype)

    def scaled_features(self) -> Tensor:
        r""":math:`\sqrt s\,R`: a scaled copy, for consumers that evaluate or concatenate the root itself."""
        return self.scale_rows(self.features)

    def map_tensors(self, fn: Callable[[Tensor, int], Tensor]) -> FeatureRoot:
        """The hand-off with ``fn(part, non_batch_dims)`` applied to every tensor part (batch reshaping; a lazy root
        is formed first)."""
        changes = {}
        for part in fields(self):
            value = self.features if part.name == "source" else getattr(self, part.name)
            if "non_batch_dims" in part.metadata and value is not None:
                changes[part.name] = fn(value, part.metadata["non_batch_dims"])
        return replace(self, **changes)

    def rows(self, index: slice, batch_indices: tuple[int | slice, ...] = ()) -> FeatureRoot:
        """The hand-off of the rows ``index`` of the batch members ``batch_indices`` (one integer or slice per batch
        dimension). A lazy root stays lazy when every batch member is kept; a part with one row per batch member
        (homoscedastic noise) is shared by the rows."""
        changes = {}
        for part in fields(self):
            value = getattr(self, part.name)
            if "non_batch_dims" not in part.metadata or value is None:
                continue
            non_batch_dims = part.metadata["non_batch_dims"]
            if non_batch_dims == 0:
                changes[part.name] = value[batch_indices]
                continue
            if isinstance(value, LazyFeatures):
                if all(batch_index == slice(None) for batch_index in batch_indices):
                    changes[part.name] = value.rows(index)
                    continue
                value = value.materialize()
            shared = value.size(-non_batch_dims) == 1 and self.num_points != 1
            trailing = (slice(None),) * (non_batch_dims - 1)
            changes[part.name] = value[(*batch_indices, slice(None) if shared else index, *trailing)]
        return replace(self, **changes)

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
        phi, noise, outputscale = self._factor_operands(features)
        return factor_capacitance(phi, noise, rhs, outputscale)

    def sums(self, rhs: Tensor | None = None, features: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        r"""The sums :math:`(s\,\Phi^H\Sigma^{-1}\Phi,\; \sqrt s\,\Phi^H\Sigma^{-1}\,\text{rhs})` that :meth:`factor`
        factors, formed the same way but not factored (:func:`gprf.linalg.capacitance_sums`): for sums
        over rows held by several processes. Arguments as in :meth:`factor`."""
        phi, noise, outputscale = self._factor_operands(features)
        return capacitance_sums(phi, noise, rhs, outputscale)

    def _factor_operands(self, features: Tensor | None) -> tuple[Tensor | LazyFeatures, Tensor, Tensor | None]:
        """The features, noise and outputscale the capacitance is formed from, the latter two in the features' real
        dtype."""
        if self.noise is None:
            raise ValueError("Factoring a feature root needs its noise variances (a covariance with a likelihood).")
        phi = self.source if features is None else features
        real_dtype = phi.dtype if isinstance(phi, LazyFeatures) else phi.real.dtype
        noise = self.noise.to(real_dtype)
        outputscale = None if self.outputscale is None else self.outputscale.to(real_dtype)
        return phi, noise, outputscale
