r"""Generalized (orthogonal) random features for stationary indefinite kernels: GRFF and GORF (Luo et al. 2021).

Reference: Q. Luo, K. Fang, J. Yang, X. Huang. *Towards Unbiased Random Features with Lower Variance for Stationary
Indefinite Kernels.* International Joint Conference on Neural Networks (IJCNN), 2021.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from gprf._checks import check_choice
from gprf.features.base import SignedFeatureMap
from gprf.features.nested import chunked_units, complete_orthonormal_rows
from gprf.features.signed_spectra import PARTS, SignedRadialSpectrum
from gprf.features.variance import fourier_iid_variance
from gprf.ops import cos_sin, haar_orthogonal

SIGNED_SAMPLERS = ("iid", "orthogonal")
# Least number of frequency rows per chunk of the stream (iid: exactly; orthogonal: whole blocks).
_CHUNK = 64


class SignedRandomFeatures(SignedFeatureMap):
    r"""Random features of a signed spectral measure :math:`\mu = \mu_+ - \mu_-` (GRFF / GORF; Luo et al. 2021).

    With :math:`s` = ``num_features`` frequencies per part, :math:`w_i \sim \mu_+/\lVert\mu_+\rVert` and
    :math:`v_i \sim \mu_-/\lVert\mu_-\rVert`,

    .. math::
        \hat k(x, y) = \frac{\lVert\mu_+\rVert}{s}\sum_{i=1}^s\cos(w_i^\top(x - y))
                     - \frac{\lVert\mu_-\rVert}{s}\sum_{i=1}^s\cos(v_i^\top(x - y)) = a(x)^\top a(y) - b(x)^\top b(y),

    with the two real roots :math:`a(x) = \sqrt{\lVert\mu_+\rVert/s}\,[\cos(W_+^\top x), \sin(W_+^\top x)]` and
    :math:`b(x) = \sqrt{\lVert\mu_-\rVert/s}\,[\cos(W_-^\top x), \sin(W_-^\top x)]` (``2s`` columns each).
    :meth:`~gprf.features.SignedFeatureMap.forward` returns ``(A, B)``; the kernel matrix is :math:`AA^\top - BB^\top`,
    which has no real root (a :class:`~gprf.features.SignedFeatureMap`, not a :class:`~gprf.features.FeatureMap`).
    :math:`E\hat k = k` (Luo et al. 2021, Thm. 4), or the kernel of the truncated measure for truncated spectra
    (:meth:`~gprf.features.FeatureMapBase.expected_kernel`).

    Samplers (frequencies are a direction times a norm from the part's radial law):

    * ``"iid"`` (GRFF): independent uniform directions. Variance (Luo et al. 2021, Thm. 4; :meth:`variance`)

      .. math::
          \frac{\lVert\mu_+\rVert^2}{s}\Big[\frac{1 + \tilde k_+(2z)}{2} - \tilde k_+(z)^2\Big]
          + \frac{\lVert\mu_-\rVert^2}{s}\Big[\frac{1 + \tilde k_-(2z)}{2} - \tilde k_-(z)^2\Big].

    * ``"orthogonal"`` (GORF): the :math:`s` directions of each part are the rows of stacked independent
      Haar-orthogonal :math:`d\times d` blocks (independent across the parts) — exactly orthogonal within a
      block. Each row is marginally uniform, so the estimate stays unbiased, with a lower variance
      (Luo et al. 2021, Thm. 6).

    Both samplers nest (:meth:`~gprf.features.FeatureMapBase.resized`): the frequencies of both parts are read
    from a stream (chunks of 64 iid frequencies, or of whole blocks), so a map with ``s`` frequencies per part
    holds the first ``s`` frequencies of each part of any larger one.

    Reference: Q. Luo, K. Fang, J. Yang, X. Huang. *Towards Unbiased Random Features with Lower Variance for
    Stationary Indefinite Kernels.* International Joint Conference on Neural Networks (IJCNN), 2021.

    Args:
        input_dim: Input dimension :math:`d` (inputs already divided by the lengthscale).
        num_features: Frequencies per part :math:`s` (each root has ``2 * num_features`` columns).
        spectrum: A :class:`~gprf.features.signed_spectra.SignedRadialSpectrum`, e.g. from
            :func:`~gprf.features.delta_gaussian_spectrum` or :func:`~gprf.features.spherical_polynomial_spectrum`.
        sampler: ``"iid"`` or ``"orthogonal"``.
        batch_shape: Independent draws per batch member.
        seed: Seed of the draws (``None``: seeded from torch's global generator state, which it does not advance).
    """

    def __init__(
        self,
        input_dim: int,
        num_features: int,
        spectrum: SignedRadialSpectrum,
        sampler: str = "iid",
        batch_shape: torch.Size | tuple[int, ...] = torch.Size(),
        seed: int | None = None,
    ) -> None:
        super().__init__(input_dim, num_features, batch_shape=batch_shape, seed=seed)
        if not isinstance(spectrum, SignedRadialSpectrum):
            raise TypeError(
                f"spectrum must be a SignedRadialSpectrum (gprf.features.delta_gaussian_spectrum or "
                f"spherical_polynomial_spectrum), got {type(spectrum).__name__}."
            )
        spectrum.check_dim(input_dim)
        self.spectrum = spectrum
        self.sampler = check_choice(sampler, "sampler", SIGNED_SAMPLERS)
        self.nesting_refusal = None
        self._register_draws()

    # ------------------------------------------------------------------ draws
    def _draw(self, generator: torch.Generator) -> dict[str, Tensor]:
        return self._draw_streams(generator)

    def _stream_units(self) -> int:
        """Frequencies per part read from the stream (``num_features``)."""
        return self.num_features

    def _chunk_size(self) -> int:
        return _CHUNK if self.sampler == "iid" else math.ceil(_CHUNK / self.input_dim) * self.input_dim

    def _member_stream_draws(self, segments: list[tuple[int, int]]) -> dict[str, Tensor]:
        names = {f"{part}_frequencies": 1 for part in PARTS}
        return chunked_units(segments, self.num_features, self._chunk_size(), self._frequencies_chunk, names)

    def _frequencies_chunk(
        self, generator: torch.Generator, chunk: int, head: dict[str, Tensor] | None
    ) -> dict[str, Tensor]:
        """Frequencies of both parts, ``(d, chunk size)`` each: directions (iid, or Haar blocks completing a head's
        partial block) times the part's radial norms."""
        d, size = self.input_dim, self._chunk_size()
        draws = {}
        for part in PARTS:
            name = f"{part}_frequencies"
            if self.sampler == "iid":
                directions = torch.randn(size, d, generator=generator, dtype=torch.float64)
                directions = directions / directions.norm(dim=-1, keepdim=True)
            else:
                existing = torch.empty(0, d, dtype=torch.float64) if head is None else head[name].mT
                directions = _orthogonal_directions(existing / existing.norm(dim=-1, keepdim=True), size, generator)
            norms = self.spectrum.sample_norms(part, (size,), d, generator)
            draws[name] = (directions * norms.unsqueeze(-1)).mT
        return draws

    # ------------------------------------------------------------------ features
    @property
    def root_dim(self) -> int:
        """Columns of each root, ``2 * num_features`` (a cosine and a sine per frequency)."""
        return 2 * self.num_features

    def _featurize(self, x: Tensor) -> tuple[Tensor, Tensor]:
        self.spectrum.check_inputs(x, type(self).__name__)
        roots = []
        for part, mass in zip(PARTS, self.spectrum.masses, strict=True):
            projections = x @ getattr(self, f"{part}_frequencies")
            scale = math.sqrt(mass / self.num_features)
            roots.append(cos_sin(projections, scale))
        return roots[0], roots[1]

    # ------------------------------------------------------------------ closed forms
    def _expected_kernel(self, x1: Tensor, x2: Tensor) -> Tensor:
        """The spectrum's ``expected_profile``: the target, or the kernel of the truncated measure."""
        return self.spectrum.expected_profile((x1 - x2).norm(dim=-1))

    def _variance(self, x1: Tensor, x2: Tensor, part: str) -> Tensor:
        """Luo et al. (2021), Thm. 4, for ``sampler="iid"`` (a real estimate: both ``part`` values agree)."""
        if self.sampler != "iid":
            raise NotImplementedError(
                f"No closed-form variance for sampler={self.sampler!r} (only 'iid'); estimate it by resampling."
            )
        r = (x1 - x2).norm(dim=-1)
        total = torch.zeros_like(r)
        for part_name, mass in zip(PARTS, self.spectrum.masses, strict=True):
            k, k_two = self.spectrum.part_profile(part_name, r), self.spectrum.part_profile(part_name, 2 * r)
            total = total + mass**2 * fourier_iid_variance(k, k_two, self.num_features)
        return total

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, spectrum={self.spectrum!r}, sampler={self.sampler!r}"


def _orthogonal_directions(existing: Tensor, size: int, generator: torch.Generator) -> Tensor:
    """``size`` rows (a multiple of ``d``) of stacked Haar blocks that continue the ``existing`` unit rows: their
    partial last block is completed in its orthogonal complement, then fresh blocks follow."""
    d = existing.size(-1)
    partial = existing.size(0) % d
    blocks = [existing]
    if partial:
        blocks.append(complete_orthonormal_rows(existing[existing.size(0) - partial :], generator))
    fresh = (size - existing.size(0) - (d - partial if partial else 0)) // d
    blocks.append(haar_orthogonal((fresh,), d, generator=generator).reshape(fresh * d, d))
    return torch.cat(blocks)
