r"""Polynomial sketches, real and complex, for :math:`k(x, y) = (x^\top y + \text{bias})^p`.

The sketches and their complex variants follow Wacker, Kanagawa & Filippone (2024, §3–4); TensorSketch is that of
Pham & Pagh (2013).

Every feature is a product of :math:`p` independent random projections,
:math:`\phi(x) = D^{-1/2}\prod_{i=1}^p (W_i x)` (elementwise), so that
:math:`E[\phi(x)^\top\overline{\phi(y)}] = \prod_i E[(w_i^\top x)\overline{(w_i^\top y)}] = (x^\top y)^p`
whenever :math:`E[w\bar w^\top] = I`. A bias :math:`c > 0` is handled by prepending the coordinate
:math:`\sqrt c` to every input, since :math:`[\sqrt c, x]^\top[\sqrt c, y] = x^\top y + c`. Complex sketches
estimate the real-part kernel :math:`\mathrm{Re}\,\phi(x)^\top\overline{\phi(y)}`, usually with a much lower
variance for non-negative data (Wacker et al. 2024, §3.3, §4.3).

Complex draws are stored as real tensors with a trailing dimension of 2 (``torch.view_as_complex`` in
the forward pass): ``Module.to(float32)`` would silently drop the imaginary part of complex buffers.

References:
    * J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal of Machine
      Learning Research, 2024 (arXiv:2201.08712).
    * N. Pham, R. Pagh. *Fast and Scalable Polynomial Kernels via Explicit Feature Maps.* ACM SIGKDD International
      Conference on Knowledge Discovery and Data Mining (KDD), 2013.
"""

from __future__ import annotations

import math
import numbers

import torch
from torch import Tensor

from gprf._checks import check_choice
from gprf.features.base import FeatureMap
from gprf.features.nested import chunked_units
from gprf.features.sketch_variance import pair_statistics, sketch_variance
from gprf.ops import fwht, next_power_of_two, pad_to_power_of_two

SKETCHES = ("gaussian", "rademacher", "srht", "tensorsketch")
# Features per chunk of a Gaussian or Rademacher stream (and the least number per chunk of a TensorSRHT stream).
_CHUNK = 64

# Complex Rademacher values {1, i, -1, -i} as (real, imaginary) pairs, indexed by a uniform phase 0..3.
_COMPLEX_UNITS = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]], dtype=torch.float64)


def _rademacher(shape: tuple[int, ...], generator: torch.Generator, is_complex: bool) -> Tensor:
    """iid ±1 (real) or uniform {±1, ±i} (complex, stored as (..., 2)), float64."""
    if is_complex:
        return _COMPLEX_UNITS[torch.randint(0, 4, shape, generator=generator)]
    return 2.0 * torch.randint(0, 2, shape, generator=generator).to(torch.float64) - 1.0


def _check_degree(degree: object) -> int:
    if isinstance(degree, bool) or not isinstance(degree, numbers.Integral) or degree < 0:
        raise ValueError(f"degree must be a non-negative integer, got {degree!r}.")
    return int(degree)


def _check_bias(bias: object) -> float:
    if isinstance(bias, bool) or not isinstance(bias, numbers.Real) or not math.isfinite(bias) or bias < 0:
        raise ValueError(f"bias must be a finite number >= 0 (it enters as a sqrt(bias) coordinate), got {bias!r}.")
    return float(bias)


class PolynomialSketch(FeatureMap):
    r"""Random features for the polynomial kernel :math:`k(x, y) = (x^\top y + \text{bias})^p`.

    Sketches (all unbiased; ``D = num_features``, complex maps count complex features):

    * ``"gaussian"``: :math:`W_i` with iid :math:`N(0, 1)` entries, or :math:`CN(0, 1)` (real and imaginary
      parts :math:`N(0, \tfrac12)`) when ``complex=True``.
    * ``"rademacher"``: iid :math:`\pm1` entries, or uniform on :math:`\{\pm1, \pm i\}` when complex.
    * ``"srht"``: TensorSRHT (Wacker et al. 2024, Alg. 1). Inputs are zero-padded to :math:`d = 2^k`; for every
      block of :math:`d` features and every degree :math:`i`, a Rademacher (complex: :math:`\{\pm1,\pm i\}`)
      diagonal :math:`D_{b,i}` and a permutation :math:`P_{b,i}`; the block is
      :math:`\prod_i P_{b,i} H D_{b,i} x` with :math:`H` the unnormalised Hadamard matrix applied by the
      fast Walsh–Hadamard transform, :math:`O(pD\log d)` per input instead of :math:`O(pDd)`.
    * ``"tensorsketch"``: TensorSketch (Pham & Pagh 2013), the circular convolution of :math:`p`
      independent CountSketches computed with FFTs, :math:`O(p(d + D\log D))` per input; real only.

    :meth:`variance` gives the closed forms of Wacker et al. (2024, Theorems 2, 5, 10) for every sketch except
    TensorSketch.

    Every sketch but TensorSketch nests (:meth:`~gprf.features.FeatureMapBase.resized`): Gaussian and Rademacher
    columns are read from a stream in chunks of 64, TensorSRHT blocks whole. TensorSketch hashes the inputs into
    ``F`` buckets, so a sketch of another size shares no draws with it.

    References:
        * J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal of
          Machine Learning Research, 2024 (arXiv:2201.08712).
        * N. Pham, R. Pagh. *Fast and Scalable Polynomial Kernels via Explicit Feature Maps.* ACM SIGKDD
          International Conference on Knowledge Discovery and Data Mining (KDD), 2013.

    Args:
        input_dim: Input dimension (before the bias coordinate).
        num_features: Number ``D`` of (real or complex) features.
        degree: Polynomial degree :math:`p \ge 0` (default 2).
        sketch: ``"gaussian"`` (the default), ``"rademacher"``, ``"srht"`` or ``"tensorsketch"``.
        complex: Complex features (real-part kernel estimate); not available for TensorSketch.
        bias: :math:`c \ge 0` in :math:`(x^\top y + c)^p`.
        batch_shape: Independent draws for each batch member.
        seed: Seed of the draws.
    """

    def __init__(
        self,
        input_dim: int,
        num_features: int,
        degree: int = 2,
        sketch: str = "gaussian",
        complex: bool = False,
        bias: float = 0.0,
        batch_shape: torch.Size | tuple[int, ...] = torch.Size(),
        seed: int | None = None,
    ) -> None:
        super().__init__(input_dim, num_features, batch_shape=batch_shape, seed=seed)
        self.degree = _check_degree(degree)
        self.sketch = check_choice(sketch, "sketch", SKETCHES)
        if complex and sketch == "tensorsketch":
            raise ValueError(
                "complex TensorSketch is not supported (its FFT-based construction is real); use "
                "sketch='srht', 'rademacher' or 'gaussian' for complex features."
            )
        self.is_complex = bool(complex)
        self.bias = _check_bias(bias)
        # The sketch sees [sqrt(bias), x]; with bias 0 the extra coordinate would only cost work.
        self.sketch_dim = input_dim + (1 if self.bias > 0 else 0)
        self.padded_dim = max(2, next_power_of_two(self.sketch_dim)) if sketch == "srht" else self.sketch_dim
        self._set_num_features(num_features)
        if sketch == "tensorsketch" and self.degree > 0:
            self.nesting_refusal = (
                "TensorSketch hashes the inputs into num_features buckets, so sketches of different sizes share no "
                "draws; use sketch='srht', 'rademacher' or 'gaussian' for nested draws"
            )
        else:
            self.nesting_refusal = None
        self._register_draws()

    def _set_num_features(self, num_features: int) -> None:
        self.num_features = num_features
        self.num_blocks = math.ceil(num_features / self.padded_dim)

    # ------------------------------------------------------------------ draws
    def _draw(self, generator: torch.Generator) -> dict[str, Tensor]:
        if self.degree == 0:
            return {}
        if self.sketch != "tensorsketch":
            return self._draw_streams(generator)
        batch, p, d, f = tuple(self.batch_shape), self.degree, self.sketch_dim, self.num_features
        return {
            "hashes": torch.randint(0, f, (*batch, p, d), generator=generator),
            "signs": _rademacher((*batch, p, d), generator, False),
        }

    def _stream_units(self) -> int:
        """Columns (Gaussian, Rademacher) or blocks of ``padded_dim`` columns (TensorSRHT) read from the stream."""
        return self.num_blocks if self.sketch == "srht" else self.num_features

    def _member_stream_draws(self, segments: list[tuple[int, int]]) -> dict[str, Tensor]:
        if self.degree == 0:
            return {}
        if self.sketch == "srht":
            blocks = math.ceil(_CHUNK / self.padded_dim)
            return chunked_units(segments, self.num_blocks, blocks, self._srht_chunk, {"signs": 0, "permutations": 0})
        return chunked_units(segments, self.num_features, _CHUNK, self._weights_chunk, {"weights": 2})

    def _weights_chunk(
        self, generator: torch.Generator, chunk: int, head: dict[str, Tensor] | None
    ) -> dict[str, Tensor]:
        shape = (self.degree, self.sketch_dim, _CHUNK)
        if self.sketch == "rademacher":
            return {"weights": _rademacher(shape, generator, self.is_complex)}
        if self.is_complex:
            return {"weights": torch.randn(*shape, 2, generator=generator, dtype=torch.float64) * 0.5**0.5}
        return {"weights": torch.randn(*shape, generator=generator, dtype=torch.float64)}

    def _srht_chunk(self, generator: torch.Generator, chunk: int, head: dict[str, Tensor] | None) -> dict[str, Tensor]:
        shape = (math.ceil(_CHUNK / self.padded_dim), self.degree, self.padded_dim)
        return {
            "signs": _rademacher(shape, generator, self.is_complex),
            "permutations": torch.rand(*shape, generator=generator, dtype=torch.float64).argsort(dim=-1),
        }

    # ------------------------------------------------------------------ features
    def augment(self, x: Tensor) -> Tensor:
        """``[sqrt(bias), x]`` (or ``x`` when the bias is 0): the vectors whose inner product is sketched."""
        if self.bias == 0:
            return x
        column = x.new_full((*x.shape[:-1], 1), math.sqrt(self.bias))
        return torch.cat([column, x], dim=-1)

    def _complex(self, name: str) -> Tensor:
        draws = getattr(self, name)
        return torch.view_as_complex(draws) if self.is_complex else draws

    def _featurize(self, x: Tensor) -> Tensor:
        if self.degree == 0:
            batch = torch.broadcast_shapes(x.shape[:-2], self.batch_shape)
            return x.new_ones(*batch, x.size(-2), self.num_features) / math.sqrt(self.num_features)
        z = self.augment(x)
        if self.sketch == "tensorsketch":
            return self._tensorsketch(z)
        if self.sketch == "srht":
            features = self._srht(z)
        else:
            weights = self._complex("weights")
            z = z.to(weights.dtype)
            features = z @ weights[..., 0, :, :]
            for i in range(1, self.degree):
                features = features * (z @ weights[..., i, :, :])
        return features / math.sqrt(self.num_features)

    def _srht(self, z: Tensor) -> Tensor:
        # Signs (*batch, 1, blocks, p, d[, 2]) against inputs (..., n, 1, d). The input is real, so a complex
        # sign pattern D = A + iB transforms as H(zA) + iH(zB): two real FWHTs, cheaper than a complex one.
        signs = self.signs.unsqueeze(-4 - int(self.is_complex))
        permutations = self.permutations.unsqueeze(-4)
        padded = pad_to_power_of_two(z, dim=-1)
        if padded.size(-1) < self.padded_dim:  # a 1-d input is padded to 2 (d - 1 appears in the variance)
            padded = torch.nn.functional.pad(padded, (0, self.padded_dim - padded.size(-1)))
        padded = padded.unsqueeze(-2)
        features = None
        for i in range(self.degree):
            if self.is_complex:
                real = fwht(padded * signs[..., i, :, 0])
                index = permutations[..., i, :].expand(real.shape)
                imag = fwht(padded * signs[..., i, :, 1]).gather(-1, index)
                projected = torch.complex(real.gather(-1, index), imag)
            else:
                transformed = fwht(padded * signs[..., i, :])
                projected = transformed.gather(-1, permutations[..., i, :].expand(transformed.shape))
            features = projected if features is None else features * projected
        return features.flatten(-2)[..., : self.num_features]

    def _tensorsketch(self, z: Tensor) -> Tensor:
        f = self.num_features
        spectrum = None
        for i in range(self.degree):
            values = z * self.signs[..., i, :].unsqueeze(-2)
            index = self.hashes[..., i, :].unsqueeze(-2).expand(values.shape)
            count_sketch = values.new_zeros(*values.shape[:-1], f).scatter_add(-1, index, values)
            transformed = torch.fft.rfft(count_sketch, n=f)
            spectrum = transformed if spectrum is None else spectrum * transformed
        return torch.fft.irfft(spectrum, n=f)

    # ------------------------------------------------------------------ closed forms
    def _expected_kernel(self, x1: Tensor, x2: Tensor) -> Tensor:
        """:math:`(x1_i^\\top x2_i + \\text{bias})^p` row by row."""
        return ((x1 * x2).sum(-1) + self.bias).pow(self.degree)

    def _variance(self, x1: Tensor, x2: Tensor, part: str) -> Tensor:
        """Closed-form variance of :math:`\\hat k(x1_i, x2_i)` (inputs as passed to ``forward``); see
        :func:`gprf.features.sketch_variance.sketch_variance`."""
        if self.sketch == "tensorsketch":
            raise NotImplementedError("TensorSketch has no closed-form variance in gprf; estimate it by resampling.")
        c, n, s = pair_statistics(self.augment(x1), self.augment(x2))
        if self.degree == 0:
            return torch.zeros_like(c)
        return sketch_variance(
            self.sketch, self.is_complex, part, c, n, s, self.degree, self.num_features, self.padded_dim
        )

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, degree={self.degree}, sketch={self.sketch!r}, complex={self.is_complex}, "
            f"bias={self.bias}"
        )
