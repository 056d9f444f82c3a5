r"""Signed radial spectral measures of stationary indefinite kernels (Luo et al. 2021, §II and §IV-A1).

A stationary kernel :math:`k(x - y) = \int \cos(w^\top(x - y))\,d\mu(w)` whose spectral measure
:math:`\mu` is *signed* is indefinite. A Jordan decomposition :math:`\mu = \mu_+ - \mu_-` into two
nonnegative measures with masses :math:`\lVert\mu_\pm\rVert` writes it as the difference of two
positive-definite kernels,

.. math::
    k(z) = \lVert\mu_+\rVert\,\tilde k_+(z) - \lVert\mu_-\rVert\,\tilde k_-(z), \qquad
    \tilde k_\pm(z) = E_{w\sim\mu_\pm/\lVert\mu_\pm\rVert}\cos(w^\top z),

which random features estimate part by part (:class:`~gprf.features.SignedRandomFeatures`). Both measures
here are radial, :math:`d\mu(w) = p(\lVert w\rVert)\,dw`, so a frequency is a uniformly random direction times
a norm drawn from the one-dimensional law :math:`\propto w^{d-1}\,p_\pm(w)` — the factor :math:`w^{d-1}`
(the surface of the sphere of radius :math:`w`) is the radial Jacobian.

* :func:`~gprf.features.delta_gaussian_spectrum`: :math:`k(z) = \sum_i a_i e^{-z^2/2\sigma_i^2}`, a signed mixture of
  :math:`N(0, \sigma_i^{-2}I)`, sampled exactly (component, then :math:`\chi_d/\sigma_i`).
* :func:`~gprf.features.spherical_polynomial_spectrum`: :math:`k(z) = (1 - z^2/a^2)^p` on the unit sphere (Pennington et
  al. 2015; Luo et al. 2021, eq. 18), a Bessel-function density sampled by a numerical inverse CDF on a truncated
  radius.

References:
    * Q. Luo, K. Fang, J. Yang, X. Huang. *Towards Unbiased Random Features with Lower Variance for Stationary
      Indefinite Kernels.* International Joint Conference on Neural Networks (IJCNN), 2021.
    * J. Pennington, F. X. Yu, S. Kumar. *Spherical Random Features for Polynomial Kernels.* Advances in Neural
      Information Processing Systems (NeurIPS), 2015.
    * L. J. Landau. *Bessel Functions: Monotonicity and Bounds.* Journal of the London Mathematical Society 61(1),
      2000.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
import torch
from scipy import special, stats
from torch import Tensor

from gprf._checks import check_choice
from gprf.settings import validate_inputs

PARTS = ("positive", "negative")
# Landau (2000): |J_nu(x)| <= c x^(-1/3) for every order nu >= 0 and x > 0.
_LANDAU_CONSTANT = 0.7857468705
# Radial grid spacing of the numerical inverse CDF: the density oscillates with period pi in w.
_GRID_STEP = 0.005
_DEFAULT_TAIL_TOLERANCE = 1e-3
_MAX_AUTOMATIC_RADIUS = 2000.0


def _as_float64(r: Tensor) -> np.ndarray:
    return r.detach().to(device="cpu", dtype=torch.float64).numpy()


def _like(values: np.ndarray, r: Tensor) -> Tensor:
    return torch.as_tensor(values, dtype=r.dtype, device=r.device)


def sphere_characteristic(t: np.ndarray, dim: int) -> np.ndarray:
    r""":math:`\Omega_d(t) = E\cos(t\,u^\top e) = \Gamma(d/2)(2/t)^{d/2-1}J_{d/2-1}(t) = {}_0F_1(;d/2;-t^2/4)`.

    The characteristic function of a uniform direction :math:`u` on :math:`S^{d-1}` (the hypergeometric form
    stays finite for every order and argument).
    """
    return special.hyp0f1(dim / 2.0, -np.square(t) / 4.0)


class SignedRadialSpectrum(ABC):
    r"""A radial signed spectral measure with its Jordan decomposition :math:`\mu = \mu_+ - \mu_-`.

    Subclasses give the target profile, the normalised part kernels :math:`\tilde k_\pm` and a sampler for
    the frequency norms of each part; directions are uniform (or orthogonal, see
    :class:`~gprf.features.SignedRandomFeatures`).
    """

    #: Whether the kernel is only defined for unit-norm inputs.
    on_sphere: bool = False

    @property
    @abstractmethod
    def masses(self) -> tuple[float, float]:
        r""":math:`(\lVert\mu_+\rVert, \lVert\mu_-\rVert)` of the measure that is sampled."""

    @abstractmethod
    def profile_sq(self, r2: Tensor) -> Tensor:
        """The exact target :math:`k` as a function of the squared distance ``r2``."""

    @abstractmethod
    def part_profile(self, part: str, r: Tensor) -> Tensor:
        r""":math:`\tilde k_\pm(r)`, the normalised positive-definite kernel of ``part`` (1 where its mass is 0)."""

    @abstractmethod
    def _sample_norms(self, part: str, shape: tuple[int, ...], dim: int, generator: torch.Generator) -> Tensor:
        """Norms of frequencies of ``part`` in ``dim`` dimensions (float64, CPU)."""

    def check_dim(self, input_dim: int) -> None:  # noqa: B027 - a hook: most spectra accept every dimension
        """Raise if the spectrum cannot be used in ``input_dim`` dimensions."""

    def check_inputs(self, x: Tensor, owner: str) -> None:  # noqa: B027 - a hook: most spectra accept every input
        """Raise if ``x`` lies outside the kernel's domain."""

    def sample_norms(self, part: str, shape: tuple[int, ...], dim: int, generator: torch.Generator) -> Tensor:
        """Independent draws of the norm of a frequency of ``part`` (zeros for a part of mass 0)."""
        check_choice(part, "part", PARTS)
        if self.masses[PARTS.index(part)] == 0.0:
            return torch.zeros(shape, dtype=torch.float64)
        return self._sample_norms(part, shape, dim, generator)

    def profile(self, r: Tensor) -> Tensor:
        """The exact target kernel at distances ``r``."""
        return self.profile_sq(r.square())

    def expected_profile(self, r: Tensor) -> Tensor:
        r""":math:`\lVert\mu_+\rVert\tilde k_+(r) - \lVert\mu_-\rVert\tilde k_-(r)`: the mean of the estimator
        (the target, or the kernel of the truncated measure)."""
        positive, negative = self.masses
        return positive * self.part_profile("positive", r) - negative * self.part_profile("negative", r)

    def truncation_bias(self, r: Tensor) -> Tensor:
        """:math:`k(r) - E\\hat k(r)`: zero for exactly sampled spectra."""
        return self.profile(r) - self.expected_profile(r)


class DeltaGaussianSpectrum(SignedRadialSpectrum):
    r"""Signed Gaussian mixture :math:`k(z) = \sum_i a_i \exp(-z^2/2\sigma_i^2)` (Luo et al. 2021, eqs. 19–20).

    The spectral measure is :math:`\mu = \sum_i a_i N(0, \sigma_i^{-2} I_d)`; it is split into the components
    with :math:`a_i > 0` (:math:`\mu_+`, mass :math:`\sum_{a_i>0} a_i`) and those with :math:`a_i < 0`
    (:math:`\mu_-`), both sampled exactly: a component with probability :math:`|a_i|/\lVert\mu_\pm\rVert`, then
    the norm :math:`\chi_d/\sigma_i`. This is the minimal (Hahn–Jordan) decomposition up to the overlap of the
    positive and negative components, which is negligible when the :math:`\sigma_i` are well separated (for
    :math:`\sigma = (1, 10)` in :math:`d = 64` the two laws concentrate on radii near 8 and 0.8). Components with
    equal :math:`\sigma_i` are merged first, so :math:`a = (1, -1)` with :math:`\sigma_1 = \sigma_2` is rejected as
    the zero kernel instead of being sampled as two cancelling parts.

    Reference: Q. Luo, K. Fang, J. Yang, X. Huang. *Towards Unbiased Random Features with Lower Variance for
    Stationary Indefinite Kernels.* International Joint Conference on Neural Networks (IJCNN), 2021.
    """

    def __init__(self, weights: Sequence[float], lengthscales: Sequence[float]) -> None:
        weights = np.asarray(weights, dtype=np.float64).reshape(-1)
        lengthscales = np.asarray(lengthscales, dtype=np.float64).reshape(-1)
        if weights.size == 0 or weights.shape != lengthscales.shape:
            raise ValueError(
                f"weights and lengthscales must be non-empty and of equal length, got {weights.size} and "
                f"{lengthscales.size} values."
            )
        if not (np.isfinite(weights).all() and np.isfinite(lengthscales).all()):
            raise ValueError("weights and lengthscales must be finite.")
        if (lengthscales <= 0).any():
            raise ValueError(f"lengthscales must be positive, got {lengthscales.tolist()}.")
        unique, inverse = np.unique(lengthscales, return_inverse=True)
        merged = np.zeros_like(unique)
        np.add.at(merged, inverse, weights)
        keep = merged != 0.0
        if not keep.any():
            raise ValueError(
                f"weights {weights.tolist()} with lengthscales {lengthscales.tolist()} cancel: the kernel is "
                "identically zero. Give at least one lengthscale a non-zero total weight."
            )
        self.weights, self.lengthscales = merged[keep], unique[keep]

    def _part(self, part: str) -> np.ndarray:
        return self.weights > 0 if part == "positive" else self.weights < 0

    @property
    def masses(self) -> tuple[float, float]:
        return float(self.weights[self._part("positive")].sum()), float(-self.weights[self._part("negative")].sum())

    def _mixture(self, weights: np.ndarray, lengthscales: np.ndarray, r2: Tensor) -> Tensor:
        terms = [w * torch.exp(-0.5 * r2 / s**2) for w, s in zip(weights.tolist(), lengthscales.tolist(), strict=True)]
        return torch.stack(terms).sum(0) if terms else torch.zeros_like(r2)

    def profile_sq(self, r2: Tensor) -> Tensor:
        return self._mixture(self.weights, self.lengthscales, r2)

    def part_profile(self, part: str, r: Tensor) -> Tensor:
        check_choice(part, "part", PARTS)
        mask = self._part(part)
        mass = np.abs(self.weights[mask]).sum()
        if mass == 0.0:
            return torch.ones_like(r)
        return self._mixture(np.abs(self.weights[mask]) / mass, self.lengthscales[mask], r.square())

    def _sample_norms(self, part: str, shape: tuple[int, ...], dim: int, generator: torch.Generator) -> Tensor:
        mask = self._part(part)
        probabilities = torch.as_tensor(np.abs(self.weights[mask]), dtype=torch.float64)
        count = math.prod(shape)
        component = torch.multinomial(probabilities, count, replacement=True, generator=generator)
        uniform = torch.rand(count, generator=generator, dtype=torch.float64)
        chi = torch.as_tensor(stats.chi.ppf(uniform.numpy(), df=dim), dtype=torch.float64)
        scales = torch.as_tensor(self.lengthscales[mask], dtype=torch.float64)[component]
        return (chi / scales).reshape(shape)

    def __repr__(self) -> str:
        return f"DeltaGaussianSpectrum(weights={self.weights.tolist()}, lengthscales={self.lengthscales.tolist()})"


class SphericalPolynomialSpectrum(SignedRadialSpectrum):
    r"""The polynomial kernel on the unit sphere, :math:`k(z) = (1 - z^2/a^2)^p`, :math:`z = \lVert x - y\rVert`.

    For unit vectors :math:`k = ((1 - 2/a^2) + (2/a^2)x^\top y)^p`. On the sphere :math:`z \le 2`, and writing
    :math:`1 - z^2/a^2 = (1 - 4/a^2) + (4/a^2)(1 - z^2/4)` extends :math:`k` to :math:`\mathbb R^d` as a sum of
    the compactly supported functions :math:`(1 - z^2/4)_+^i`. Their Fourier transforms give the radial signed
    density of Pennington et al. (2015) and Luo et al. (2021, eq. 18) (here normalised so that
    :math:`k(z) = \int p(\lVert w\rVert)\cos(w^\top z)\,dw`):

    .. math::
        p(w) = \pi^{-d/2}\sum_{i=0}^{p} \frac{p!}{(p-i)!}\Big(1 - \frac{4}{a^2}\Big)^{p-i}
        \Big(\frac{4}{a^2}\Big)^{i}\, w^{-d/2-i} J_{d/2+i}(2w),

    and the law of the norm has the signed density :math:`\rho(w) = \frac{2\pi^{d/2}}{\Gamma(d/2)}w^{d-1}p(w)`
    (with the radial Jacobian :math:`w^{d-1}`). :math:`\rho_\pm = \max(\pm\rho, 0)` is the Jordan decomposition.

    **Truncation.** The term :math:`i` decays like :math:`w^{(d-3)/2-i}`, so the total variation
    :math:`\int|\rho|` is finite only when every term with a non-zero coefficient has :math:`i > (d-1)/2`
    (e.g. :math:`a = 2` and :math:`p \ge d/2`). The measure is restricted to :math:`\lVert w\rVert \le W`
    (``truncation``); the features are then unbiased for the kernel of the truncated measure
    (:meth:`~gprf.features.SignedRadialSpectrum.expected_profile`), and
    :meth:`~gprf.features.SignedRadialSpectrum.truncation_bias` reports :math:`k(z) - k_W(z)`. When the total
    variation diverges a truncation radius is required, and the bias at :math:`z = 0` grows with :math:`W` (the Fourier
    inversion of a ball's indicator diverges at its centre in :math:`d \ge 3`): choose :math:`W` and check the
    reported bias. When it converges and ``truncation`` is omitted, :math:`W` is chosen so that Landau's bound
    :math:`|J_\nu(x)| \le 0.7858\,x^{-1/3}` puts the neglected total variation (a uniform bound on the bias,
    :attr:`tail_variation_bound`) below ``1e-3``.

    Norms are drawn by inverting the cumulative trapezoid integral of :math:`\rho_\pm` on a grid of step 0.005
    (construction time only); :meth:`~gprf.features.SignedRadialSpectrum.part_profile` integrates the same
    discretised law, so the estimator is unbiased for :meth:`~gprf.features.SignedRadialSpectrum.expected_profile`
    up to the :math:`O(h^2)` midpoint error (below 1e-5).

    References:
        * J. Pennington, F. X. Yu, S. Kumar. *Spherical Random Features for Polynomial Kernels.* Advances in Neural
          Information Processing Systems (NeurIPS), 2015.
        * Q. Luo, K. Fang, J. Yang, X. Huang. *Towards Unbiased Random Features with Lower Variance for Stationary
          Indefinite Kernels.* International Joint Conference on Neural Networks (IJCNN), 2021.
        * L. J. Landau. *Bessel Functions: Monotonicity and Bounds.* Journal of the London Mathematical Society
          61(1), 2000.
    """

    on_sphere = True

    def __init__(self, a: float, degree: int, input_dim: int, truncation: float | None = None) -> None:
        if not (isinstance(a, (int, float)) and math.isfinite(a) and a > 0):
            raise ValueError(f"a must be a positive number, got {a!r}.")
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 0:
            raise ValueError(f"degree must be a non-negative integer, got {degree!r}.")
        if isinstance(input_dim, bool) or not isinstance(input_dim, int) or input_dim < 1:
            raise ValueError(f"input_dim must be a positive integer, got {input_dim!r}.")
        self.a, self.degree, self.input_dim = float(a), degree, input_dim
        coefficients = [
            math.comb(degree, i) * (1 - 4 / a**2) ** (degree - i) * (4 / a**2) ** i for i in range(degree + 1)
        ]
        # (order index i, coefficient c_i) of the non-zero terms of eq. 18.
        self.terms = [(i, c) for i, c in enumerate(coefficients) if c != 0.0]
        self.finite_variation = all(i > (input_dim - 1) / 2 for i, _ in self.terms)
        if truncation is None:
            truncation = self._automatic_radius()
        elif not (isinstance(truncation, (int, float)) and math.isfinite(truncation) and truncation > 0):
            raise ValueError(f"truncation must be a positive radius, got {truncation!r}.")
        self.truncation = float(truncation)
        self._tabulate()

    # ------------------------------------------------------------------ density
    def radial_density(self, w: np.ndarray) -> np.ndarray:
        r"""The signed radial density
        :math:`\rho(w) = \frac{2}{\Gamma(d/2)}\sum_i c_i\, i!\, w^{d-1}\,\frac{J_{d/2+i}(2w)}{w^{d/2+i}}`."""
        d = self.input_dim
        w = np.asarray(w, dtype=np.float64)
        total = np.zeros_like(w)
        with np.errstate(divide="ignore"):
            log_w = np.log(w)
        for i, c in self.terms:
            order = d / 2 + i
            # J_nu(2w) / w^nu = 0F1(; nu + 1; -w^2) / Gamma(nu + 1); the powers are combined in logs.
            log_scale = math.log(2 * abs(c)) + math.lgamma(i + 1) - math.lgamma(d / 2) - math.lgamma(order + 1)
            power = np.exp(log_scale + (d - 1) * log_w) if d > 1 else np.full_like(w, math.exp(log_scale))
            total += math.copysign(1.0, c) * power * special.hyp0f1(order + 1, -np.square(w))
        return total

    @property
    def tail_variation_bound(self) -> float:
        r"""Landau bound on :math:`\int_W^\infty|\rho(w)|\,dw` (``inf`` when the total variation diverges).

        It bounds :math:`|k(z) - k_W(z)|` for every :math:`z`.
        """
        return self._tail_bound(self.truncation)

    def _tail_bound(self, radius: float) -> float:
        if not self.finite_variation:
            return math.inf
        d, bound = self.input_dim, 0.0
        for i, c in self.terms:
            exponent = d / 2 - 1 - i - 1 / 3  # |rho_i(w)| <= const * w^exponent
            const = 2 * abs(c) * math.exp(math.lgamma(i + 1) - math.lgamma(d / 2)) * _LANDAU_CONSTANT * 2 ** (-1 / 3)
            bound += const * radius ** (exponent + 1) / -(exponent + 1)
        return bound

    def _automatic_radius(self) -> float:
        if not self.finite_variation:
            raise ValueError(
                f"The spectral measure of (1 - z^2/a^2)^p with a={self.a}, p={self.degree} in d={self.input_dim} "
                "dimensions has infinite total variation (its Bessel terms decay too slowly), so it cannot be "
                "sampled without a cut-off: pass truncation=W (a frequency radius, e.g. 20) and check the "
                "resulting bias with truncation_bias(). The variation is finite for a=2 and degree >= input_dim/2."
            )
        radius = 1.0
        while self._tail_bound(radius) > _DEFAULT_TAIL_TOLERANCE:
            radius *= 1.25
            if radius > _MAX_AUTOMATIC_RADIUS:
                raise ValueError(
                    f"Bounding the truncation bias by {_DEFAULT_TAIL_TOLERANCE} needs a frequency radius above "
                    f"{_MAX_AUTOMATIC_RADIUS:g} for a={self.a}, p={self.degree}, d={self.input_dim}; pass "
                    "truncation=W explicitly and check truncation_bias()."
                )
        return radius

    def _tabulate(self) -> None:
        num_cells = max(2000, math.ceil(self.truncation / _GRID_STEP))
        grid = np.linspace(0.0, self.truncation, num_cells + 1)
        rho = self.radial_density(grid)
        self._midpoints = 0.5 * (grid[1:] + grid[:-1])
        self._grid = grid
        self._cell_masses = {}
        for part, sign in zip(PARTS, (1.0, -1.0), strict=True):
            clipped = np.maximum(sign * rho, 0.0)
            self._cell_masses[part] = 0.5 * (clipped[1:] + clipped[:-1]) * np.diff(grid)
        self._masses = tuple(float(self._cell_masses[part].sum()) for part in PARTS)

    # ------------------------------------------------------------------ spectrum interface
    @property
    def masses(self) -> tuple[float, float]:
        return self._masses

    def check_dim(self, input_dim: int) -> None:
        if input_dim != self.input_dim:
            raise ValueError(
                f"This spherical polynomial spectrum was built for input_dim={self.input_dim}, not {input_dim}; "
                f"build it with spherical_polynomial_spectrum(a, degree, input_dim={input_dim}, ...)."
            )

    def check_inputs(self, x: Tensor, owner: str) -> None:
        check_unit_norm(x, owner)

    def profile_sq(self, r2: Tensor) -> Tensor:
        return (1.0 - r2 / self.a**2).pow(self.degree)

    def part_profile(self, part: str, r: Tensor) -> Tensor:
        check_choice(part, "part", PARTS)
        masses = self._cell_masses[part]
        total = masses.sum()
        if total == 0.0:
            return torch.ones_like(r)
        distances = _as_float64(r).reshape(-1, 1)
        values = sphere_characteristic(distances * self._midpoints, self.input_dim) @ (masses / total)
        return _like(values.reshape(r.shape), r)

    def _sample_norms(self, part: str, shape: tuple[int, ...], dim: int, generator: torch.Generator) -> Tensor:
        masses = self._cell_masses[part]
        cdf = np.concatenate([[0.0], np.cumsum(masses)]) / masses.sum()
        uniform = torch.rand(math.prod(shape), generator=generator, dtype=torch.float64).numpy()
        # The first cell whose cumulative mass exceeds u, then linear interpolation inside it.
        cell = np.clip(np.searchsorted(cdf, uniform, side="right") - 1, 0, masses.size - 1)
        fraction = (uniform - cdf[cell]) / np.maximum(masses[cell] / masses.sum(), np.finfo(np.float64).tiny)
        norms = self._grid[cell] + np.clip(fraction, 0.0, 1.0) * np.diff(self._grid)[cell]
        return torch.as_tensor(norms, dtype=torch.float64).reshape(shape)

    def __repr__(self) -> str:
        return (
            f"SphericalPolynomialSpectrum(a={self.a}, degree={self.degree}, input_dim={self.input_dim}, "
            f"truncation={self.truncation:g})"
        )


def check_unit_norm(x: Tensor, owner: str) -> None:
    """Raise unless every row of ``x`` has unit norm (checked where :class:`gprf.settings.validate_inputs` applies)."""
    if not validate_inputs.applies_to(x):
        return
    tolerance = 1e3 * torch.finfo(x.dtype).eps
    if not bool(((x.norm(dim=-1) - 1.0).abs() <= tolerance).all()):
        raise ValueError(
            f"{owner} is defined on the unit sphere: every input row must have norm 1 (tolerance {tolerance:.1e}). "
            "Normalise the inputs first, e.g. x = x / x.norm(dim=-1, keepdim=True)."
        )


def delta_gaussian_spectrum(weights: Sequence[float], lengthscales: Sequence[float]) -> DeltaGaussianSpectrum:
    r"""Spectrum of :math:`k(z) = \sum_i a_i \exp(-z^2/2\sigma_i^2)` (``weights`` :math:`a_i`, ``lengthscales``
    :math:`\sigma_i`); see :class:`DeltaGaussianSpectrum`."""
    return DeltaGaussianSpectrum(weights, lengthscales)


def spherical_polynomial_spectrum(
    a: float, degree: int, input_dim: int, truncation: float | None = None
) -> SphericalPolynomialSpectrum:
    r"""Spectrum of :math:`(1 - \lVert x - y\rVert^2/a^2)^p` on the unit sphere of :math:`\mathbb R^d`, truncated to
    frequency norms :math:`\le` ``truncation``; see :class:`SphericalPolynomialSpectrum`."""
    return SphericalPolynomialSpectrum(a, degree, input_dim, truncation=truncation)
