r"""Random and optimized Maclaurin features for dot-product kernels and the Gaussian kernel.

Random Maclaurin features of Kar & Karnick (2012); the optimized allocation over degrees of Wacker, Kanagawa &
Filippone (2024, §5); the Gaussian kernel as in Wacker & Filippone (2022, §2).

References:
    * P. Kar, H. Karnick. *Random Feature Maps for Dot Product Kernels.* International Conference on Artificial
      Intelligence and Statistics (AISTATS), 2012.
    * J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal of Machine
      Learning Research, 2024 (arXiv:2201.08712).
    * J. Wacker, M. Filippone. *Local Random Feature Approximations of the Gaussian Kernel.* Procedia Computer
      Science (KES), 2022 (arXiv:2204.05667).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from gprf._checks import check_choice, check_features_input, check_positive_int
from gprf.features.base import FeatureMap, real_root
from gprf.features.maclaurin_allocation import (
    MaclaurinAllocation,
    allocate_from_coefficients,
    maclaurin_coefficients,
    resolve_maclaurin_arguments,
)
from gprf.features.nested import next_draw_version
from gprf.features.sketches import PolynomialSketch

ALLOCATION_MODES = ("optimized", "random")


def _child_seed(generator: torch.Generator) -> int:
    return int(torch.randint(0, 2**62, (1,), generator=generator).item())


class MaclaurinFeatures(FeatureMap):
    r"""Maclaurin features for :math:`k(x, y) = \text{pref}(x, y)\sum_{n\ge0} a_n (x^\top y)^n`.

    Kernels: ``"exponential"`` :math:`e^{x^\top y}` (:math:`a_n = 1/n!`), ``"polynomial"``
    :math:`(x^\top y + c)^p` (:math:`a_n = \binom pn c^{p-n}`, ``bias`` :math:`c`, default 1), and
    ``"gaussian"`` :math:`e^{-\lVert x - y\rVert^2/2} = e^{-\lVert x\rVert^2/2}e^{-\lVert y\rVert^2/2}e^{x^\top y}`
    (features multiplied by :math:`e^{-\lVert x\rVert^2/2}`). For an allocation :math:`(D_1, \ldots, D_m)`
    the map is the constant :math:`\sqrt{a_0}` followed by, for every :math:`n` with :math:`D_n > 0`, an
    independent degree-:math:`n` :class:`~gprf.features.PolynomialSketch` with :math:`D_n` features scaled
    by :math:`\sqrt{a_n}`, so ``num_features = 1 + sum(D_n)`` and :math:`E\hat k` is the expansion truncated
    at :math:`m`. Allocations:

    * ``"optimized"`` (Wacker et al. 2024, Alg. 2–3): chosen by :meth:`fit_allocation` on a data sample to minimise
      expected variance plus squared truncation bias (:mod:`gprf.features.maclaurin_allocation`). Until it
      is fitted, the features are split evenly over degrees ``1..min_degree``.
    * ``"random"`` (Kar & Karnick 2012): each of the ``F - 1`` non-constant features draws its degree from
      :math:`p(n) \propto 2^{-(n+1)}` on the degrees ``1..max_degree`` with :math:`a_n > 0` (``max_degree=None``:
      all of them); block :math:`n` is rescaled by :math:`\sqrt{D_n/(p(n)(F-1))}`, which makes the estimate
      unbiased for the expansion over that support. The degrees are redrawn by :meth:`resample`.
    * an explicit list ``[D_1, ..., D_m]`` summing to ``num_features - 1``.

    The Gaussian kernel is shift invariant but its truncated expansion is exact only near the origin, so the
    Gaussian map subtracts a stored ``center`` (set to the sample mean by :meth:`fit_allocation`, as in
    Wacker & Filippone 2022, Alg. 1) before featurizing; dot-product kernels are never centred.

    The allocation and the centre are buffers: ``load_state_dict`` into a freshly built map rebuilds the
    per-degree sketches to the stored allocation first.

    References:
        * P. Kar, H. Karnick. *Random Feature Maps for Dot Product Kernels.* International Conference on Artificial
          Intelligence and Statistics (AISTATS), 2012.
        * J. Wacker, M. Kanagawa, M. Filippone. *Improved Random Features for Dot Product Kernels.* Journal of
          Machine Learning Research, 2024 (arXiv:2201.08712).
        * J. Wacker, M. Filippone. *Local Random Feature Approximations of the Gaussian Kernel.* Procedia Computer
          Science (KES), 2022 (arXiv:2204.05667).
    """

    nesting_refusal = (
        "its features are split over degrees by an allocation of num_features - 1 (optimized, fixed, or for "
        "allocation='random' drawn for all F - 1 features at once and stored only as counts per degree), so a map "
        "of another size has another split; resize a PolynomialSketch or RandomFourierFeatures instead, or build "
        "a MaclaurinFeatures map of the new size"
    )

    def __init__(
        self,
        input_dim: int,
        num_features: int,
        kernel: str = "exponential",
        sketch: str = "rademacher",
        complex: bool = False,
        allocation: str | list[int] = "optimized",
        degree: int | None = None,
        bias: float | None = None,
        min_degree: int = 2,
        max_degree: int | None = 10,
        batch_shape: torch.Size | tuple[int, ...] = torch.Size(),
        seed: int | None = None,
    ) -> None:
        super().__init__(input_dim, num_features, batch_shape=batch_shape, seed=seed)
        self.kernel, self.sketch, self.degree, self.bias = resolve_maclaurin_arguments(kernel, sketch, degree, bias)
        self.is_complex = bool(complex)
        if isinstance(allocation, str):
            self.allocation_mode = check_choice(allocation, "allocation", ALLOCATION_MODES)
        else:
            self.allocation_mode = "fixed"
        if max_degree is None and self.allocation_mode != "random" and kernel != "polynomial":
            raise ValueError("max_degree=None (an unbounded expansion) is only possible with allocation='random'.")
        self.max_degree = self.degree if kernel == "polynomial" else max_degree
        self.min_degree = min(check_positive_int(min_degree, "min_degree"), self.max_degree or min_degree)
        self.register_buffer("center", torch.zeros(input_dim))
        generator = self._generator()
        counts = self._initial_counts(allocation, generator)
        self.register_buffer("allocation", torch.tensor(counts, dtype=torch.long))
        # sqrt(a_n) per sketch, times sqrt(D_n / (p(n)(F-1))) for random Maclaurin: a buffer, so that a state
        # loaded into a map built with another allocation mode keeps its scaling.
        self.register_buffer("degree_scales", torch.zeros(0))
        self.sketches = torch.nn.ModuleList()
        self._build_sketches(counts, generator)

    # ------------------------------------------------------------------ allocation
    def coefficients(self, max_degree: int) -> Tensor:
        """:math:`a_0..a_{\\max}` (float64)."""
        return maclaurin_coefficients(self.kernel, self.degree, self.bias, max_degree)

    def _buffer_dtype(self) -> torch.dtype:
        return self.center.dtype

    def _support(self) -> list[int]:
        """Degrees >= 1 that random Maclaurin may draw (a_n > 0, up to max_degree)."""
        if self.max_degree is None:
            return []
        a = self.coefficients(self.max_degree)
        return [n for n in range(1, self.max_degree + 1) if a[n] > 0]

    def _random_counts(self, generator: torch.Generator) -> list[int]:
        budget = self.num_features - 1
        if self.max_degree is None:
            # Unbounded geometric law P(n) = 2^-n on n >= 1 (the normalised 2^-(n+1)).
            uniform = torch.rand(budget, generator=generator, dtype=torch.float64)
            degrees = (torch.floor(-torch.log2(1.0 - uniform)) + 1).long()
        else:
            support = torch.tensor(self._support())
            probabilities = torch.tensor([2.0 ** -(n + 1) for n in self._support()], dtype=torch.float64)
            degrees = support[torch.multinomial(probabilities, budget, replacement=True, generator=generator)]
        top = int(degrees.max()) if budget > 0 else 0
        return torch.bincount(degrees, minlength=top + 1)[1:].tolist()

    def _degree_probability(self, n: int) -> float:
        if self.max_degree is None:
            return 2.0**-n
        support = self._support()
        return 2.0 ** -(n + 1) / sum(2.0 ** -(k + 1) for k in support)

    def _initial_counts(self, allocation: str | list[int], generator: torch.Generator) -> list[int]:
        budget = self.num_features - 1
        if self.allocation_mode == "fixed":
            counts = list(allocation)
            if any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in counts) or sum(counts) != budget:
                raise ValueError(
                    f"allocation must be non-negative integers D_1..D_m summing to num_features - 1 = {budget} "
                    f"(the constant feature is extra), got {allocation!r} (sum {sum(counts) if counts else 0})."
                )
            if self.kernel == "polynomial" and len(counts) > self.degree:
                raise ValueError(f"allocation has degrees above the polynomial degree {self.degree}.")
            return counts
        if self.allocation_mode == "random":
            if budget < 1:
                raise ValueError("num_features must be >= 2 (the constant feature plus at least one random feature).")
            return self._random_counts(generator)
        if budget < self.min_degree:
            raise ValueError(
                f"num_features={self.num_features} is too small: the constant feature plus one feature per degree "
                f"up to min_degree={self.min_degree} needs num_features >= {self.min_degree + 1}."
            )
        a = self.coefficients(self.min_degree)
        useful = [n for n in range(1, self.min_degree + 1) if a[n] > 0] or [self.min_degree]
        share, extra = divmod(budget, len(useful))
        counts = [0] * max(useful)
        for rank, n in enumerate(useful):
            counts[n - 1] = share + (1 if rank < extra else 0)
        return counts

    def _build_sketches(self, counts: list[int], generator: torch.Generator) -> None:
        dtype = self.center.dtype
        device = self.center.device
        sketches = []
        for n, count in enumerate(counts, start=1):
            if count == 0:
                continue
            sketch = PolynomialSketch(
                self.input_dim,
                count,
                n,
                sketch=self.sketch,
                complex=self.is_complex,
                batch_shape=self.batch_shape,
                seed=_child_seed(generator),
            )
            sketches.append(sketch.to(device=device, dtype=dtype))
        self.sketches = torch.nn.ModuleList(sketches)
        self.allocation = torch.tensor(counts, dtype=torch.long, device=device)
        a = self.coefficients(max(len(counts), 1))
        scales = []
        for sketch in self.sketches:
            n, count = sketch.degree, sketch.num_features
            scale = math.sqrt(a[n])
            if self.allocation_mode == "random":
                scale *= math.sqrt(count / (self._degree_probability(n) * (self.num_features - 1)))
            scales.append(scale)
        self.degree_scales = torch.tensor(scales, dtype=dtype, device=device)
        self.draw_version = next_draw_version()

    @property
    def counts(self) -> list[int]:
        """The allocation :math:`[D_1, \\ldots, D_m]` (constant feature excluded)."""
        return self.allocation.tolist()

    def fit_allocation(self, x: Tensor, max_samples: int | None = 1000) -> MaclaurinAllocation:
        """Optimize the allocation on the data ``x`` (already divided by the lengthscale) and rebuild the map.

        For the Gaussian kernel the centre becomes the mean of ``x`` and the allocation is optimized on the
        centred data. The pair statistics cost :math:`O(n^2)` time and memory, so at most ``max_samples``
        rows (a seeded random subsample; ``None``: all) enter them. Only for ``allocation="optimized"``.
        Returns the allocation with its expected variance and squared bias on the sample.
        """
        if self.allocation_mode != "optimized":
            raise ValueError(f"fit_allocation needs allocation='optimized', this map uses {self.allocation_mode!r}.")
        if x.dim() != 2 or x.size(-1) != self.input_dim:
            raise ValueError(f"fit_allocation expects a sample of shape (n, {self.input_dim}), got {tuple(x.shape)}.")
        x = x.detach()
        if self.kernel == "gaussian":
            self.center = x.mean(0).to(self.center)
            x = x - x.mean(0)
        if max_samples is not None and x.size(0) > max_samples:
            rows = torch.randperm(x.size(0), generator=self._generator())[:max_samples]
            x = x[rows.to(x.device)]
        result = allocate_from_coefficients(
            x,
            self.num_features,
            self.coefficients(self.max_degree),
            self.kernel,
            self.sketch,
            self.is_complex,
            self.min_degree,
            self.max_degree,
        )
        self._build_sketches(result.counts, self._generator())
        return result

    def _draw(self, generator: torch.Generator) -> dict[str, Tensor]:
        return {}  # every draw lives in the per-degree sketches (and the random degrees)

    @torch.no_grad()
    def resample(self, generator: torch.Generator | None = None) -> None:
        """Redraw the sketches (and, for random Maclaurin, the degrees) from ``generator``."""
        self._refuse_if_expanded()
        generator = self._generator(generator)
        counts = self._random_counts(generator) if self.allocation_mode == "random" else self.counts
        self._build_sketches(counts, generator)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        stored = state_dict.get(prefix + "allocation")
        if stored is not None and stored.tolist() != self.counts:
            # Shapes follow the allocation: rebuild before the children load their draws (and the scales).
            self._build_sketches(stored.tolist(), self._generator())
        scales = state_dict.get(prefix + "degree_scales")
        if scales is not None and scales.shape != self.degree_scales.shape:
            self.degree_scales = torch.zeros_like(scales, dtype=self.degree_scales.dtype)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _map_random_buffers(self, fn, batch_shape: torch.Size) -> FeatureMap:
        new = super()._map_random_buffers(fn, batch_shape)
        new.sketches = torch.nn.ModuleList([sketch._map_random_buffers(fn, batch_shape) for sketch in new.sketches])
        return new

    # ------------------------------------------------------------------ features
    def _centred(self, x: Tensor) -> Tensor:
        return x - self.center if self.kernel == "gaussian" else x

    def _featurize(self, x: Tensor) -> Tensor:
        return self._expansion(self._centred(x))

    def real_features_about(self, x: Tensor, center: Tensor) -> Tensor:
        r"""Real root of the expansion about ``center`` instead of the stored centre: features of :math:`x - c`.

        For the Gaussian kernel, :math:`k(x - c, y - c) = k(x, y)` for every centre :math:`c`, and the truncated
        expansion is most accurate near its centre; localized prediction re-centres it near each test point
        (:class:`~gprf.prediction.LocalizedPredictionStrategy`). ``x`` ``(..., n, d)`` and ``center`` broadcast.
        """
        if self.kernel != "gaussian":
            raise ValueError(
                f"Only the Gaussian kernel is shift invariant; the {self.kernel!r} expansion has no centre."
            )
        check_features_input(x, self.input_dim, type(self).__name__)
        return real_root(self._expansion(x - center))

    def _expansion(self, z: Tensor) -> Tensor:
        """Features of inputs ``z`` already centred (or not centred, for dot-product kernels)."""
        batch = torch.broadcast_shapes(z.shape[:-2], self.batch_shape)
        a0 = float(self.coefficients(0)[0])
        constant = z.new_full((*batch, z.size(-2), 1), math.sqrt(a0))
        blocks = [constant] + [
            scale * sketch(z) for scale, sketch in zip(self.degree_scales, self.sketches, strict=True)
        ]
        dtype = torch.promote_types(z.dtype, torch.complex64) if self.is_complex else z.dtype
        features = torch.cat([block.expand(*batch, *block.shape[-2:]).to(dtype) for block in blocks], dim=-1)
        if self.kernel == "gaussian":
            features = features * torch.exp(-0.5 * z.square().sum(-1, keepdim=True))
        return features

    def _prefactor(self, z1: Tensor, z2: Tensor) -> Tensor:
        if self.kernel == "gaussian":
            return torch.exp(-0.5 * (z1.square().sum(-1) + z2.square().sum(-1)))
        return torch.ones(z1.shape[:-1], dtype=z1.dtype, device=z1.device)

    def _expected_kernel(self, x1: Tensor, x2: Tensor) -> Tensor:
        """The expansion truncated to the map's degrees (random: to ``max_degree``; ``None``: the full kernel)."""
        z1, z2 = self._centred(x1), self._centred(x2)
        if self.allocation_mode == "random" and self.max_degree is None:
            target = {"exponential": lambda c: c.exp(), "gaussian": lambda c: c.exp()}[self.kernel]
            return self._prefactor(z1, z2) * target((z1 * z2).sum(-1))
        top = self.max_degree if self.allocation_mode == "random" else len(self.counts)
        a = self.coefficients(top)
        degrees = [0] + (self._support() if self.allocation_mode == "random" else [s.degree for s in self.sketches])
        c = (z1 * z2).sum(-1)
        return self._prefactor(z1, z2) * sum(float(a[n]) * c.pow(n) for n in degrees)

    def _variance(self, x1: Tensor, x2: Tensor, part: str) -> Tensor:
        """:math:`\\text{pref}^2\\sum_n a_n^2\\,\\mathrm{Var}_n` over the independent per-degree sketches (fixed
        allocations)."""
        if self.allocation_mode == "random":
            raise NotImplementedError("No closed-form variance for random Maclaurin (the degrees are random).")
        z1, z2 = self._centred(x1), self._centred(x2)
        total = torch.zeros(z1.shape[:-1], dtype=z1.dtype, device=z1.device)
        for scale, sketch in zip(self.degree_scales, self.sketches, strict=True):
            total = total + scale**4 * sketch.variance(z1, z2, part)
        return self._prefactor(z1, z2).square() * total

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, kernel={self.kernel!r}, sketch={self.sketch!r}, complex={self.is_complex}, "
            f"allocation={self.allocation_mode!r} {self.counts}"
        )
