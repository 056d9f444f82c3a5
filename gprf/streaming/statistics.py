r"""Sufficient statistics of a random-feature GP with fixed hyperparameters.

For the finite model :math:`y = R w + \mu + \varepsilon`, :math:`w \sim N(0, I_F)`,
:math:`\varepsilon \sim N(0, \Sigma)`, :math:`\Sigma = \mathrm{diag}(\sigma_i^2)`, everything the posterior
and the marginal likelihood need is a sum over data points:

.. math::
    G = R^\top\Sigma^{-1}R = \sum_i \frac{r_i r_i^\top}{\sigma_i^2}, \quad
    b = R^\top\Sigma^{-1}(y - \mu) = \sum_i \frac{r_i (y_i - \mu_i)}{\sigma_i^2}, \quad
    q = \sum_i \frac{(y_i - \mu_i)^2}{\sigma_i^2}, \quad
    s = \sum_i \log\sigma_i^2, \quad N.

The weight posterior is :math:`N(C^{-1}b, C^{-1})` with :math:`C = I + G`, and by the Woodbury identity and
the matrix determinant lemma the exact log marginal likelihood of the finite model is

.. math::
    \log p(y) = -\tfrac12\big(q - b^\top C^{-1} b + \log\det C + s + N\log 2\pi\big).

Sums can be split over chunks of data, processes or devices and added up in any order
(:meth:`~gprf.streaming.SufficientStatistics.merge`, :func:`gprf.streaming.all_reduce_statistics`). All statistics are
in the factor dtype (:class:`gprf.settings.factor_dtype`, float64 by default); the memory they need is
:math:`O(F^2)` whatever :math:`N`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from gprf.linalg import CapacitanceFactor
from gprf.prediction import WeightSpacePosterior

#: A fingerprint is [feature root (F columns), noise variance, prior mean] at the probe input; what each part shows.
FINGERPRINT_PARTS = {
    "features": "random features or kernel hyperparameters",
    "noise": "likelihood noise",
    "mean": "prior mean",
}
# Agreement required within each part, relative to the part's largest magnitude (so that a tiny outputscale or noise
# does not make every fingerprint agree): the same model evaluated on different devices or with a different summation
# order differs in the last bits, different draws or hyperparameters by O(1).
FINGERPRINT_RTOL = 1e-4

# The summed statistics, in the order they are packed for a collective.
SUMMED_FIELDS = ("gram", "rhs", "quadratic", "log_noise", "num_data")


def probe_inputs(input_dim: int, dtype: torch.dtype, device: torch.device) -> Tensor:
    """The fixed ``(1, input_dim)`` input at which :attr:`SufficientStatistics.fingerprint` is evaluated."""
    return torch.linspace(0.1, 0.9, input_dim, dtype=dtype, device=device).unsqueeze(0)


def fingerprint_part(fingerprint: Tensor, part: str, root_dim: int) -> Tensor:
    """One part (a key of :data:`FINGERPRINT_PARTS`) of a fingerprint ``(*batch, root_dim + 2)``."""
    start, stop = {"features": (0, root_dim), "noise": (root_dim, root_dim + 1), "mean": (root_dim + 1, None)}[part]
    return fingerprint[..., start:stop]


def fingerprint_mismatch(
    first: Tensor, second: Tensor, root_dim: int, parts: tuple[str, ...] = tuple(FINGERPRINT_PARTS)
) -> str | None:
    """What differs between two fingerprints (e.g. ``"likelihood noise"``), or ``None`` when the ``parts`` agree
    within :data:`FINGERPRINT_RTOL` of each part's largest magnitude (one host synchronisation)."""
    if first.shape != second.shape:
        return "number of features, batch shape or input dimension"
    agree = []
    for part in parts:
        a, b = fingerprint_part(first, part, root_dim), fingerprint_part(second, part, root_dim)
        scale = torch.maximum(a.abs().amax(-1, keepdim=True), b.abs().amax(-1, keepdim=True))
        agree.append(((a - b).abs() <= FINGERPRINT_RTOL * scale).all())
    differing = [FINGERPRINT_PARTS[part] for part, ok in zip(parts, torch.stack(agree).tolist(), strict=True) if not ok]
    return " and ".join(differing) if differing else None


@dataclass(frozen=True)
class SufficientStatistics:
    r"""Float64 sums :math:`G, b, q, s, N` of a random-feature GP over the data seen so far (module docstring).

    Batch shapes follow the model: ``gram`` has shape ``(*B, F, F)`` with ``B`` the batch shape of the
    features and the noise; ``rhs`` ``(*B', F)`` and ``quadratic`` ``(*B')`` may carry extra leading target
    dimensions (``k`` targets sharing one kernel and noise give ``rhs`` of shape ``(k, F)`` and a single
    :math:`F\times F` Gram matrix); ``log_noise`` has the noise's batch shape, ``num_data`` is a 0-d tensor.

    ``fingerprint`` ``(*batch, F + 2)`` is the model at a fixed probe input (``probe_inputs(input_dim)``, with
    ``input_dim`` the raw input dimension): the scaled feature root, the likelihood's own noise variance and the prior
    mean (:data:`~gprf.streaming.statistics.FINGERPRINT_PARTS`). It is not summed: it identifies the random features,
    hyperparameters, noise and mean the sums were taken with, so that statistics of different models are never added
    (:meth:`merge`, :func:`~gprf.streaming.all_reduce_statistics`) or used for prediction with another kernel or mean
    (:class:`~gprf.streaming.StreamingPredictor`). Each part is compared relative to its own magnitude.
    """

    gram: Tensor
    rhs: Tensor
    quadratic: Tensor
    log_noise: Tensor
    num_data: Tensor
    fingerprint: Tensor
    input_dim: int

    @property
    def root_dim(self) -> int:
        """Columns ``F`` of the feature root (the size of the Gram matrix)."""
        return self.gram.size(-1)

    def merge(self, other: SufficientStatistics) -> SufficientStatistics:
        """The statistics of the union of both data sets (the sums add up).

        Raises ``ValueError`` when the shapes differ or the fingerprints show different random features,
        hyperparameters, noise or mean (one host synchronisation for that check).
        """
        if not isinstance(other, SufficientStatistics):
            raise TypeError(f"merge expects SufficientStatistics, got {type(other).__name__}.")
        for name in SUMMED_FIELDS:
            if getattr(self, name).shape != getattr(other, name).shape:
                raise ValueError(
                    f"Cannot merge statistics with {name} of shapes {tuple(getattr(self, name).shape)} and "
                    f"{tuple(getattr(other, name).shape)}: both must come from the same model and target shape."
                )
        differing = (
            "input dimension"
            if self.input_dim != other.input_dim
            else fingerprint_mismatch(self.fingerprint, other.fingerprint, self.root_dim)
        )
        if differing is not None:
            raise ValueError(
                f"Cannot merge statistics computed with different {differing}; build every part with the same model "
                "(same seed and hyperparameters, or load one state_dict everywhere)."
            )
        summed = {name: getattr(self, name) + getattr(other, name) for name in SUMMED_FIELDS}
        return SufficientStatistics(**summed, fingerprint=self.fingerprint, input_dim=self.input_dim)

    def __add__(self, other: SufficientStatistics) -> SufficientStatistics:
        return self.merge(other)

    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> SufficientStatistics:
        """The same statistics on ``device`` and/or cast to the floating-point ``dtype`` (each kept when ``None``).

        Casting to float32 halves the memory and the traffic of :func:`~gprf.streaming.all_reduce_statistics`, at
        float32 accuracy of the posterior factored from them.
        """
        if dtype is not None and (not isinstance(dtype, torch.dtype) or not dtype.is_floating_point):
            raise TypeError(
                f"dtype must be a floating-point torch.dtype (e.g. torch.float32 or torch.float64), got {dtype!r}."
            )
        moved = {name: getattr(self, name).to(device=device, dtype=dtype) for name in (*SUMMED_FIELDS, "fingerprint")}
        return SufficientStatistics(**moved, input_dim=self.input_dim)

    def capacitance(self) -> CapacitanceFactor:
        """The Cholesky factor of :math:`C = I + G`."""
        return CapacitanceFactor.from_gram(self.gram)

    def posterior(self, feature_versions: tuple[int, ...] = ()) -> WeightSpacePosterior:
        r"""The weight posterior :math:`N(C^{-1}b, C^{-1})`, as the in-memory prediction strategy builds it."""
        factor = self.capacitance()
        mean = factor.solve(self.rhs.unsqueeze(-1)).squeeze(-1)
        return WeightSpacePosterior(factor, self.rhs, mean, feature_versions)

    def log_marginal_likelihood(self) -> Tensor:
        r""":math:`\log p(y)` of the finite model, shape ``rhs.shape[:-1]`` (see the module docstring).

        GPyTorch's ``ExactMarginalLogLikelihood`` reports this divided by :math:`N` (plus any priors).
        """
        factor = self.capacitance()
        projected = factor.solve_root(self.rhs.unsqueeze(-1)).squeeze(-1)  # L^{-1} b: b^T C^{-1} b = |L^{-1} b|^2
        inv_quad = self.quadratic - projected.square().sum(-1)
        logdet = factor.logdet() + self.log_noise
        return -0.5 * (inv_quad + logdet + self.num_data * math.log(2 * math.pi))
