r"""Random Fourier features for stationary positive-definite kernels.

Rahimi & Recht (2007); orthogonal random features (ORF) and structured orthogonal random features
(SORF) from Yu et al. (2016); quasi-Monte-Carlo features from Yang et al. (2014).

References:
    * A. Rahimi, B. Recht. *Random Features for Large-Scale Kernel Machines.* Advances in Neural Information
      Processing Systems (NeurIPS), 2007.
    * F. X. Yu, A. T. Suresh, K. Choromanski, D. Holtmann-Rice, S. Kumar. *Orthogonal Random Features.* Advances in
      Neural Information Processing Systems (NeurIPS), 2016.
    * J. Yang, V. Sindhwani, H. Avron, M. W. Mahoney. *Quasi-Monte Carlo Feature Maps for Shift-Invariant Kernels.*
      International Conference on Machine Learning (ICML), 2014.
"""

from __future__ import annotations

import math

import torch
from scipy import stats
from torch import Tensor

from gprf._checks import check_choice
from gprf.features.base import FeatureMap
from gprf.features.nested import chunked_units, complete_orthonormal_rows, stream_generator
from gprf.features.spectral import SPECTRA, StationarySpectrum, stationary_spectrum
from gprf.features.variance import fourier_iid_variance
from gprf.ops import cos_sin, fwht, haar_orthogonal, next_power_of_two, pad_to_power_of_two, sobol_uniform

FOURIER_KERNELS = tuple(SPECTRA)
FOURIER_SAMPLERS = ("iid", "orthogonal", "structured", "qmc")
# Frequencies per chunk of an iid stream (and the least number of rows per chunk of a block stream): enough to
# make the per-chunk generators cheap, few enough to waste little at the end of a map.
_IID_CHUNK = 64


class RandomFourierFeatures(FeatureMap):
    r"""Random Fourier features :math:`\phi(x) = m^{-1/2}[\cos(Wx), \sin(Wx)]` (``F = 2m`` features).

    For a stationary kernel :math:`k(x - y) = E_{w\sim p}\cos(w^\top(x-y))` (Bochner),
    :math:`\phi(x)^\top\phi(y) = \frac1m\sum_{i=1}^m \cos(w_i^\top(x - y))`. The frequencies
    :math:`w_i` are the rows of :math:`W` and follow :math:`w = s\,z`, :math:`z\sim N(0, I_d)`, with the
    kernel's radial scale :math:`s` (see :mod:`gprf.features.spectral`). Samplers:

    * ``"iid"``: independent frequencies; unbiased, variance
      :math:`\frac1m[(1 + k(2\Delta))/2 - k(\Delta)^2]` (:meth:`variance`).
    * ``"orthogonal"`` (ORF): stacked independent :math:`d\times d` Haar-orthogonal blocks whose rows
      are rescaled by independent draws of the norm of :math:`w` (:math:`\chi_d\cdot s`); each row is
      exactly distributed as :math:`p`, so the estimate is unbiased, and orthogonality within a block
      lowers the variance (Yu et al. 2016, Thm. 1).
    * ``"structured"`` (SORF): blocks :math:`\mathrm{diag}(r)\,\tilde H D_1 \tilde H D_2 \tilde H D_3`
      with :math:`\tilde H = H/\sqrt{d}` the normalised Hadamard matrix, :math:`D_i` Rademacher diagonals
      and row norms :math:`r` drawn from the radial law (instead of the constant :math:`\sqrt d` of the
      original SORF, so that Matérn kernels are supported); inputs are zero-padded to a power of two and
      the blocks are applied with the fast Walsh–Hadamard transform in :math:`O(d\log d)`. The row
      directions are not exactly uniform, so SORF is only asymptotically unbiased in :math:`d`.
    * ``"qmc"``: scrambled Sobol points mapped through the inverse normal (and, for Matérn, inverse
      :math:`\chi^2`) CDF; unbiased (every point is marginally uniform), lower variance than iid
      (Yang et al. 2014).

    Every sampler nests (:meth:`~gprf.features.FeatureMapBase.resized`): the frequencies are read from a stream
    in chunks of 64 iid frequencies, of whole orthogonal or structured blocks, or as the points of one scrambled
    Sobol sequence, so the map with ``F/2`` frequencies holds the first ``F/2`` frequencies of any larger one.

    References:
        * A. Rahimi, B. Recht. *Random Features for Large-Scale Kernel Machines.* Advances in Neural Information
          Processing Systems (NeurIPS), 2007.
        * F. X. Yu, A. T. Suresh, K. Choromanski, D. Holtmann-Rice, S. Kumar. *Orthogonal Random Features.* Advances
          in Neural Information Processing Systems (NeurIPS), 2016.
        * J. Yang, V. Sindhwani, H. Avron, M. W. Mahoney. *Quasi-Monte Carlo Feature Maps for Shift-Invariant
          Kernels.* International Conference on Machine Learning (ICML), 2014.

    Args:
        input_dim: Input dimension :math:`d` (inputs already divided by the lengthscale).
        num_features: Number of real features ``F`` (even: ``F/2`` cosine and ``F/2`` sine features).
        kernel: ``"rbf"``, ``"matern12"``, ``"matern32"``, ``"matern52"``, or the
            :class:`~gprf.features.StationarySpectrum` of another stationary kernel.
        sampler: ``"iid"``, ``"orthogonal"``, ``"structured"`` or ``"qmc"``.
        batch_shape: Independent feature draws for each batch member.
        seed: Seed of the draws (``None``: seeded from torch's global generator state, which it does not advance).
    """

    def __init__(
        self,
        input_dim: int,
        num_features: int,
        kernel: str | StationarySpectrum = "rbf",
        sampler: str = "iid",
        batch_shape: torch.Size | tuple[int, ...] = torch.Size(),
        seed: int | None = None,
    ) -> None:
        super().__init__(input_dim, num_features, batch_shape=batch_shape, seed=seed)
        self.spectrum = stationary_spectrum(kernel)
        self.kernel = self.spectrum.name
        self.sampler = check_choice(sampler, "sampler", FOURIER_SAMPLERS)
        self.block_dim = next_power_of_two(input_dim) if sampler == "structured" else input_dim
        self._set_num_features(num_features)
        self.nesting_refusal = None
        self._register_draws()

    def _set_num_features(self, num_features: int) -> None:
        if num_features % 2:
            raise ValueError(
                f"num_features must be even for random Fourier features (F/2 cosine + F/2 sine features), "
                f"got {num_features}; use {num_features + 1}."
            )
        self.num_features = num_features
        self.num_frequencies = num_features // 2
        self.num_blocks = math.ceil(self.num_frequencies / self.block_dim)

    # ------------------------------------------------------------------ draws
    def _draw(self, generator: torch.Generator) -> dict[str, Tensor]:
        return self._draw_streams(generator)

    def _stream_units(self) -> int:
        """Frequencies (iid, orthogonal, qmc) or blocks (structured) read from the stream."""
        return self.num_blocks if self.sampler == "structured" else self.num_frequencies

    def _member_stream_draws(self, segments: list[tuple[int, int]]) -> dict[str, Tensor]:
        d, units = self.input_dim, self._stream_units()
        if self.sampler == "qmc":
            return {"frequencies": self._qmc_frequencies(segments)}
        if self.sampler == "iid":
            return chunked_units(segments, units, _IID_CHUNK, self._iid_chunk, {"frequencies": 1})
        blocks_per_chunk = math.ceil(_IID_CHUNK / self.block_dim)
        if self.sampler == "orthogonal":
            return chunked_units(segments, units, blocks_per_chunk * d, self._orthogonal_chunk, {"frequencies": 1})
        return chunked_units(segments, units, blocks_per_chunk, self._structured_chunk, {"signs": 0, "radii": 0})

    def _iid_chunk(self, generator: torch.Generator, chunk: int, head: dict[str, Tensor] | None) -> dict[str, Tensor]:
        z = torch.randn(self.input_dim, _IID_CHUNK, generator=generator, dtype=torch.float64)
        return {"frequencies": z * self.spectrum.radial_scale((1, _IID_CHUNK), generator)}

    def _orthogonal_chunk(
        self, generator: torch.Generator, chunk: int, head: dict[str, Tensor] | None
    ) -> dict[str, Tensor]:
        """Whole Haar blocks with radial norms; a head's partial block is completed in its orthogonal complement."""
        d = self.input_dim
        blocks_per_chunk = math.ceil(_IID_CHUNK / d)
        rows = torch.empty(0, d, dtype=torch.float64) if head is None else head["frequencies"].mT
        kept_blocks, partial = divmod(rows.size(0), d)
        blocks = [rows[: kept_blocks * d]]
        if partial:
            existing = rows[kept_blocks * d :]
            directions = complete_orthonormal_rows(existing / existing.norm(dim=-1, keepdim=True), generator)
            norms = self._radial_norms((d - partial,), d, generator)
            blocks.append(torch.cat([existing, directions * norms.unsqueeze(-1)]))
            kept_blocks += 1
        fresh = blocks_per_chunk - kept_blocks
        if fresh:
            haar = haar_orthogonal((fresh,), d, generator=generator)
            norms = self._radial_norms((fresh, d), d, generator)
            blocks.append((haar * norms.unsqueeze(-1)).reshape(fresh * d, d))
        return {"frequencies": torch.cat(blocks).mT}

    def _structured_chunk(
        self, generator: torch.Generator, chunk: int, head: dict[str, Tensor] | None
    ) -> dict[str, Tensor]:
        p, blocks = self.block_dim, math.ceil(_IID_CHUNK / self.block_dim)
        signs = torch.randint(0, 2, (blocks, 3, p), generator=generator).to(torch.float64)
        return {"signs": 2.0 * signs - 1.0, "radii": self._radial_norms((blocks, p), p, generator)}

    def _radial_norms(self, shape: tuple[int, ...], dim: int, generator: torch.Generator) -> Tensor:
        """Norms of spectral draws in ``dim`` dimensions: chi_dim times the kernel's radial scale.

        chi_dim comes from its inverse CDF (construction time only), O(1) per draw instead of the O(dim)
        of the norm of ``dim`` normals.
        """
        uniform = torch.rand(*shape, generator=generator, dtype=torch.float64)
        chi = torch.as_tensor(stats.chi.ppf(uniform.numpy(), df=dim), dtype=torch.float64)
        return chi * self.spectrum.radial_scale(shape, generator)

    def _qmc_frequencies(self, segments: list[tuple[int, int]]) -> Tensor:
        """Points ``0..m-1`` of the scrambled Sobol sequence of each segment's seed, from the segment's start on."""
        d, m = self.input_dim, self.num_frequencies
        extra = 1 if self.spectrum.random_radial_scale else 0
        pieces = []
        for index, (start, seed) in enumerate(segments):
            stop = min(segments[index + 1][0] if index + 1 < len(segments) else m, m)
            if start < stop:
                generator = stream_generator(seed, 0)
                pieces.append(sobol_uniform(stop - start, d + extra, generator=generator, skip=start))
        u = torch.cat(pieces)
        z = torch.special.ndtri(u[:, :d])
        scale = self.spectrum.radial_scale_from_uniform(u[:, d]) if extra else torch.ones(u.size(0), dtype=u.dtype)
        return (z * scale.unsqueeze(-1)).mT

    # ------------------------------------------------------------------ features
    def projections(self, x: Tensor) -> Tensor:
        """:math:`Wx` for validated inputs, shape ``(..., n, m)``."""
        if self.sampler != "structured":
            return x @ self.frequencies
        p, m = self.block_dim, self.num_frequencies
        # (..., n, 1, p) against (*batch, 1, blocks, p): every block transforms every point.
        h = pad_to_power_of_two(x, dim=-1).unsqueeze(-2)
        signs = self.signs.unsqueeze(-4)
        for k in (2, 1, 0):
            h = fwht(h * signs[..., k, :])
        h = h * (self.radii.unsqueeze(-3) / p**1.5)
        return h.flatten(-2)[..., :m]

    def _featurize(self, x: Tensor) -> Tensor:
        return cos_sin(self.projections(x), 1.0 / math.sqrt(self.num_frequencies))

    # ------------------------------------------------------------------ closed forms
    def _expected_kernel(self, x1: Tensor, x2: Tensor) -> Tensor:
        """The target kernel :math:`k(\\lVert x1_i - x2_i\\rVert)` (exact for iid, ORF and QMC)."""
        return self.spectrum.profile((x1 - x2).norm(dim=-1))

    def _variance(self, x1: Tensor, x2: Tensor, part: str) -> Tensor:
        """:math:`\\frac1m[(1 + k(2\\Delta))/2 - k(\\Delta)^2]` for ``sampler="iid"`` (real map: both parts agree)."""
        if self.sampler != "iid":
            raise NotImplementedError(
                f"No closed-form variance for sampler={self.sampler!r} (only 'iid'); estimate it by resampling."
            )
        r = (x1 - x2).norm(dim=-1)
        return fourier_iid_variance(self.spectrum.profile(r), self.spectrum.profile(2 * r), self.num_frequencies)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, kernel={self.kernel!r}, sampler={self.sampler!r}"
