r"""Dual activations of normalised activations and their power-series coefficients (Daniely et al. 2016, 2017).

For an activation :math:`\sigma` normalised so that :math:`E_{z\sim N(0,1)}\sigma(z)^2 = 1`, the dual
activation :math:`\hat\sigma(\rho) = E[\sigma(u)\sigma(v)]` (:math:`u, v` standard normals with correlation
:math:`\rho`) has the expansion

.. math::
    \hat\sigma(\rho) = \sum_{n\ge0} b_n\rho^n, \qquad b_n \ge 0, \qquad \sum_n b_n = \hat\sigma(1) = 1

(Daniely, Frostig & Singer 2016). Non-negative coefficients summing to one make :math:`b` a probability law on the
degree :math:`n`, which is what the compositional random features sample (Algorithm 1 of Daniely, Frostig, Gupta
& Singer 2017), and keep a normalised kernel normalised. Provided here:

* ReLU :math:`\sqrt2\max(0, x)`: :math:`\hat\sigma(\rho) = (\sqrt{1-\rho^2} + \rho(\pi/2 + \arcsin\rho))/\pi`,
  :math:`b_0 = 1/\pi`, :math:`b_1 = 1/2`, :math:`b_{2k} = \frac{\binom{2k-2}{k-1}4^{1-k}}{2k(2k-1)\pi}`
  (:math:`k\ge1`), odd coefficients above one vanish:
  :math:`b = [1/\pi, 1/2, 1/(2\pi), 0, 1/(24\pi), 0, 1/(80\pi), \ldots]`.
  The coefficients decay like :math:`n^{-5/2}`, so the law has infinite variance and the series is truncated
  where its tail mass drops below ``tolerance`` (degree about 40 000 for 1e-8).
* exponential with scale :math:`s`: :math:`\hat\sigma(\rho) = e^{s^2(\rho - 1)}`, :math:`b_n = e^{-s^2}s^{2n}/n!`
  (a Poisson law; on unit vectors :math:`e^{s^2(x^\top y - 1)} = e^{-s^2\lVert x-y\rVert^2/2}`);
* identity: :math:`\hat\sigma(\rho) = \rho`;
* user-given coefficients (a polynomial dual activation).

References:
    * A. Daniely, R. Frostig, Y. Singer. *Toward Deeper Understanding of Neural Networks: The Power of
      Initialization and a Dual View on Expressivity.* Advances in Neural Information Processing Systems (NeurIPS),
      2016.
    * A. Daniely, R. Frostig, V. Gupta, Y. Singer. *Random Features for Compositional Kernels.* arXiv:1703.07872,
      2017.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache, partial

import torch
from torch import Tensor

ACTIVATIONS = ("relu", "exponential", "identity")

# Sums of coefficients are compared with 1 up to this absolute tolerance.
_SUM_TOLERANCE = 1e-10


class _ReluDual(torch.autograd.Function):
    r"""ReLU dual with its analytic derivative :math:`\hat\sigma'(\rho) = (\pi/2 + \arcsin\rho)/\pi`.

    The two terms of the closed form have infinite derivatives at :math:`\rho = \pm1` (the diagonal of every
    normalised kernel) that cancel; autograd through the formula would return NaN there.
    """

    @staticmethod
    def forward(ctx, rho: Tensor) -> Tensor:
        rho = rho.clamp(-1.0, 1.0)
        ctx.save_for_backward(rho)
        return (torch.sqrt(1.0 - rho.square()) + rho * (0.5 * math.pi + torch.arcsin(rho))) / math.pi

    @staticmethod
    def backward(ctx, grad: Tensor) -> Tensor:
        (rho,) = ctx.saved_tensors
        return grad * (0.5 * math.pi + torch.arcsin(rho)) / math.pi


def relu_dual(rho: Tensor) -> Tensor:
    r"""Closed-form dual of the normalised ReLU on :math:`[-1, 1]` (inputs are clamped to it)."""
    return _ReluDual.apply(rho)


def relu_coefficients(max_degree: int) -> Tensor:
    r"""ReLU dual coefficients :math:`b_0..b_{\max}` (float64), exact up to rounding (no cancellation)."""
    b = torch.zeros(max_degree + 1, dtype=torch.float64)
    b[0] = 1.0 / math.pi
    if max_degree >= 1:
        b[1] = 0.5
    k = torch.arange(1, max_degree // 2 + 1, dtype=torch.float64)
    # binom(2k-2, k-1) / 4^(k-1) = Gamma(k - 1/2) / (sqrt(pi) Gamma(k)), in logs to avoid overflow.
    central = torch.exp(torch.lgamma(k - 0.5) - torch.lgamma(k) - 0.5 * math.log(math.pi))
    b[2 : 2 * len(k) + 1 : 2] = central / (2.0 * k * (2.0 * k - 1.0) * math.pi)
    return b


@lru_cache(maxsize=8)
def relu_degree_for_tolerance(tolerance: float) -> int:
    """The smallest even degree whose ReLU series tail mass is at most ``tolerance``.

    The tail beyond degree ``2K`` is :math:`\\sum_{k>K} b_{2k} \\le 1/(6\\pi^{3/2}K^{3/2})` (the coefficients are
    below :math:`1/(4\\pi^{3/2}k^{5/2})`); the bound gives a starting degree that the exact partial sum confirms.
    """
    degree = 2 * math.ceil((6.0 * math.pi**1.5 * tolerance) ** (-2.0 / 3.0))
    while 1.0 - float(relu_coefficients(degree).sum()) > tolerance:
        degree *= 2
    return degree


def exponential_dual(rho: Tensor, scale: float) -> Tensor:
    return torch.exp(scale**2 * (rho - 1.0))


def _identity_dual(rho: Tensor) -> Tensor:
    return rho


class DualActivation:
    r"""A dual activation :math:`\hat\sigma(\rho) = \sum_n b_n\rho^n` with :math:`b_n\ge0`, :math:`\sum_n b_n = 1`.

    Build one with :meth:`relu`, :meth:`exponential`, :meth:`identity` or :meth:`from_coefficients`, or pass a name or a
    coefficient list wherever a skeleton expects an activation
    (:func:`~gprf.features.dual_activations.as_dual_activation`).

    Attributes:
        name: ``"relu"``, ``"exponential"``, ``"identity"`` or ``"polynomial"``.
        coefficients: :math:`b_0..b_N` (float64, CPU), the law of the degree sampled by the random features.
            For ReLU this is the series truncated where its tail mass is below the tolerance and renormalised.
        radius: Radius of convergence of the series (the second-moment recursion evaluates
            :math:`\hat\sigma` beyond 1; it is infinite where the series diverges).
    """

    def __init__(
        self,
        coefficients: Sequence[float] | Tensor,
        name: str = "polynomial",
        closed_form: Callable[[Tensor], Tensor] | None = None,
        radius: float = math.inf,
        normalize: bool = False,
    ) -> None:
        b = _check_coefficients(coefficients, normalize)
        self.name = name
        self.coefficients = b
        self.radius = radius
        self._closed_form = closed_form
        self._cdf = torch.cumsum(b, 0)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def relu(cls, tolerance: float = 1e-8, max_degree: int | None = None) -> DualActivation:
        r"""Normalised ReLU :math:`\sqrt2\max(0, x)`.

        Args:
            tolerance: Tail mass of the series dropped from the degree law (the features are unbiased for the
                truncated series, within ``2 * tolerance`` of the closed form, which calling the activation evaluates).
            max_degree: Truncate and renormalise the series at this degree instead: the target becomes that
                polynomial (no closed form), whose degree law has finite moments (finite feature variance).
        """
        if max_degree is not None:
            if isinstance(max_degree, bool) or not isinstance(max_degree, int) or max_degree < 1:
                raise ValueError(f"max_degree must be a positive integer, got {max_degree!r}.")
            return cls(relu_coefficients(max_degree), name="relu", normalize=True)
        if not 0.0 < tolerance < 1.0:
            raise ValueError(f"tolerance must lie in (0, 1), got {tolerance!r}.")
        b = relu_coefficients(relu_degree_for_tolerance(tolerance))
        return cls(b / b.sum(), name="relu", closed_form=relu_dual, radius=1.0)

    @classmethod
    def exponential(cls, scale: float = 1.0) -> DualActivation:
        r"""Exponential dual :math:`e^{s^2(\rho - 1)}` with ``scale`` :math:`s > 0` (a Gaussian kernel on the
        sphere)."""
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale) or scale <= 0:
            raise ValueError(f"scale must be a finite positive number, got {scale!r}.")
        rate = float(scale) ** 2
        # Poisson(rate) law, truncated far in its tail (mass below 1e-17).
        max_degree = int(math.ceil(rate + 12.0 * math.sqrt(rate) + 30.0))
        n = torch.arange(max_degree + 1, dtype=torch.float64)
        b = torch.exp(n * math.log(rate) - rate - torch.lgamma(n + 1.0))
        return cls(b / b.sum(), name="exponential", closed_form=partial(exponential_dual, scale=float(scale)))

    @classmethod
    def identity(cls) -> DualActivation:
        r""":math:`\hat\sigma(\rho) = \rho` (a linear node: the mean of its inputs' kernels)."""
        return cls([0.0, 1.0], name="identity", closed_form=_identity_dual)

    @classmethod
    def from_coefficients(cls, coefficients: Sequence[float] | Tensor, normalize: bool = False) -> DualActivation:
        r"""The polynomial dual :math:`\sum_n b_n\rho^n` of user-given coefficients.

        Negative coefficients are an error (the dual would not be positive definite and :math:`b` not a law).
        Coefficients that do not sum to one are an error too, unless ``normalize=True``, which divides them by
        their sum (the kernel is then rescaled so that :math:`\hat\sigma(1) = 1`).
        """
        return cls(coefficients, name="polynomial", normalize=normalize)

    # ------------------------------------------------------------------ evaluation
    def __call__(self, rho: Tensor) -> Tensor:
        """:math:`\\hat\\sigma(\\rho)` (closed form where there is one, otherwise the polynomial)."""
        if self._closed_form is not None:
            return self._closed_form(rho)
        return self.series(rho)

    def series(self, rho: Tensor) -> Tensor:
        """The power series with the stored (truncated) coefficients, by Horner's rule in chunks of degrees."""
        b = self.coefficients.to(device=rho.device, dtype=rho.dtype)
        result = torch.zeros_like(rho)
        chunk = 4096
        # Highest chunk first: result <- result * rho^len + sum_{j < len} b_{start+j} rho^j.
        for start in range(((len(b) - 1) // chunk) * chunk, -1, -chunk):
            block = b[start : start + chunk]
            powers = rho.unsqueeze(-1) ** torch.arange(len(block), device=rho.device, dtype=rho.dtype)
            result = result * rho ** len(block) + (powers * block).sum(-1)
        return result

    def extended(self, r: Tensor) -> Tensor:
        r""":math:`\sum_n b_n r^n` for :math:`r\ge0` possibly above 1 (the second-moment recursion): ``inf`` beyond
        the radius of convergence."""
        if math.isinf(self.radius):
            return self(r)
        inside = self(r.clamp(max=self.radius))
        return torch.where(r > self.radius, torch.full_like(r, math.inf), inside)

    @property
    def expected_degree(self) -> float:
        r""":math:`\sum_n n b_n = \hat\sigma'(1)`: the mean number of children a random feature visits at this node."""
        return float((torch.arange(len(self.coefficients), dtype=torch.float64) * self.coefficients).sum())

    def sample_degrees(self, num: int, generator: torch.Generator) -> Tensor:
        """``num`` iid degrees from the law :math:`b` (inverse CDF; long, CPU)."""
        u = torch.rand(num, generator=generator, dtype=torch.float64) * self._cdf[-1]
        return torch.searchsorted(self._cdf, u, right=True).clamp(max=len(self.coefficients) - 1)

    def __repr__(self) -> str:
        return f"DualActivation({self.name!r}, max_degree={len(self.coefficients) - 1})"


def _check_coefficients(coefficients: Sequence[float] | Tensor, normalize: bool) -> Tensor:
    try:
        b = torch.as_tensor(coefficients, dtype=torch.float64).detach().cpu().flatten()
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(f"activation coefficients must be a sequence of numbers, got {coefficients!r}.") from error
    if b.numel() == 0 or not bool(torch.isfinite(b).all()):
        raise ValueError(f"activation coefficients must be a non-empty list of finite numbers, got {coefficients!r}.")
    if bool((b < 0).any()):
        negative = torch.nonzero(b < 0).flatten().tolist()
        raise ValueError(
            f"activation coefficients must be non-negative (a dual activation is a power series with b_n >= 0), "
            f"got negative values at degrees {negative}."
        )
    total = float(b.sum())
    if total <= 0:
        raise ValueError("activation coefficients are all zero; at least one b_n must be positive.")
    if normalize:
        return b / total
    if abs(total - 1.0) > _SUM_TOLERANCE:
        raise ValueError(
            f"activation coefficients must sum to 1 (sigma_hat(1) = 1 keeps the kernel normalised), got sum {total!r}; "
            "divide them by their sum or pass normalize=True (DualActivation.from_coefficients)."
        )
    return b


def as_dual_activation(spec: str | Sequence[float] | Tensor | DualActivation) -> DualActivation:
    """A :class:`DualActivation` from a name (``"relu"``, ``"exponential"``, ``"identity"``), coefficients or itself."""
    if isinstance(spec, DualActivation):
        return spec
    if isinstance(spec, str):
        if spec == "relu":
            return DualActivation.relu()
        if spec == "exponential":
            return DualActivation.exponential()
        if spec == "identity":
            return DualActivation.identity()
        raise ValueError(
            f"Unknown activation {spec!r}; valid names are {', '.join(map(repr, ACTIVATIONS))}, or pass a "
            "DualActivation or a list of non-negative coefficients summing to 1."
        )
    return DualActivation.from_coefficients(spec)
