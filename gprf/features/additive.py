r"""Random Fourier features of additive (first- and second-order ANOVA) stationary kernels.

The first-order additive kernel on :math:`d` inputs is a sum of one-dimensional kernels,
:math:`k_1(x, y) = \sum_{j=1}^d k(x_j - y_j)`; the second-order term adds the pairwise interactions
:math:`k_2(x, y) = \sum_{i<j} k(x_i - y_i)\,k(x_j - y_j)` (the elementary symmetric polynomials of the
one-dimensional kernels; Duvenaud, Nickisch & Rasmussen 2011). Both have random Fourier features (Rahimi & Recht
2007) with independent draws per component, concatenated:

* dimension :math:`j`: :math:`[\cos(w_{jk}x_j), \sin(w_{jk}x_j)]_{k\le m_1}/\sqrt{m_1}` with :math:`w_{jk}` iid from
  the one-dimensional spectral law of :math:`k`;
* pair :math:`(i, j)`: :math:`[\cos(u_{k}x_i + v_{k}x_j), \sin(\cdot)]_{k\le m_2}/\sqrt{m_2}` with :math:`u_k, v_k`
  independent draws of that law. The product :math:`k(\Delta_i)k(\Delta_j)` is stationary in
  :math:`(\Delta_i, \Delta_j)` with the product spectral density (Bochner), so these are exactly the random Fourier
  features of the interaction term — the elementwise product of the complex features
  :math:`e^{\mathrm i u x_i}e^{\mathrm i v x_j}`, which is unbiased where elementwise products of the real
  :math:`[\cos, \sin]` columns are not.

References:
    * D. Duvenaud, H. Nickisch, C. E. Rasmussen. *Additive Gaussian Processes.* Advances in Neural Information
      Processing Systems (NeurIPS), 2011.
    * A. Rahimi, B. Recht. *Random Features for Large-Scale Kernel Machines.* Advances in Neural Information
      Processing Systems (NeurIPS), 2007.
"""

from __future__ import annotations

import itertools
import math

import torch
from torch import Tensor

from gprf._checks import check_positive_int
from gprf.features.base import FeatureMap
from gprf.features.spectral import StationarySpectrum, stationary_spectrum
from gprf.features.variance import fourier_iid_variance
from gprf.ops import cos_sin

ADDITIVE_ORDERS = (1, 2)


def _check_even(value: int, name: str) -> int:
    value = check_positive_int(value, name)
    if value % 2:
        raise ValueError(f"{name} must be even (cosine and sine features per frequency), got {value}; use {value + 1}.")
    return value


class AdditiveFourierFeatures(FeatureMap):
    r"""Concatenated random Fourier features of a first- or second-order additive stationary kernel.

    The real root is ``[per-dimension features (d * features_per_dim columns), per-pair features
    (d(d-1)/2 * features_per_pair columns)]``; :meth:`component_slices` gives the two blocks, so a kernel can weight
    the interaction block (its variance). ``num_features`` is the total number of columns.

    Args:
        input_dim: :math:`d`.
        features_per_dim: Features :math:`2m_1` of each one-dimensional component (even).
        kernel: ``"rbf"``, ``"matern12"``, ``"matern32"`` or ``"matern52"`` (GPyTorch's parametrisation), or the
            :class:`~gprf.features.StationarySpectrum` of another stationary kernel.
        order: 1 (sum of one-dimensional kernels) or 2 (and their pairwise products).
        features_per_pair: Features :math:`2m_2` of each pairwise component (even; default ``features_per_dim``);
            ``order=2`` only (with ``order=1`` it raises ``ValueError``).
        batch_shape: Independent draws per batch member.
        seed: Seed of the draws.
    """

    nesting_refusal = "its per-component layout is fixed at construction; build a map with other features_per_dim"

    def __init__(
        self,
        input_dim: int,
        features_per_dim: int,
        kernel: str | StationarySpectrum = "rbf",
        order: int = 1,
        features_per_pair: int | None = None,
        batch_shape: torch.Size | tuple[int, ...] = torch.Size(),
        seed: int | None = None,
    ) -> None:
        if order not in ADDITIVE_ORDERS:
            raise ValueError(f"order must be 1 or 2 (first- or second-order additive kernel), got {order!r}.")
        self.features_per_dim = _check_even(features_per_dim, "features_per_dim")
        if order == 1 and features_per_pair is not None:
            raise ValueError(
                f"features_per_pair={features_per_pair!r} sizes the pairwise interactions, which only order=2 has; "
                "pass order=2 for them, or drop features_per_pair for the first-order kernel."
            )
        pair_features = features_per_dim if features_per_pair is None else features_per_pair
        self.features_per_pair = _check_even(pair_features, "features_per_pair") if order == 2 else 0
        self.order = order
        self.spectrum = stationary_spectrum(kernel)
        self.kernel = self.spectrum.name
        self.num_pairs = input_dim * (input_dim - 1) // 2 if order == 2 else 0
        total = input_dim * self.features_per_dim + self.num_pairs * self.features_per_pair
        super().__init__(input_dim, total, batch_shape=batch_shape, seed=seed)
        pairs = list(itertools.combinations(range(input_dim), 2)) if order == 2 else []
        # Which two input columns each pair reads (not random: a plain buffer that follows .to()).
        self.register_buffer("pair_index", torch.tensor(pairs, dtype=torch.long).reshape(-1, 2), persistent=False)
        self._register_draws()

    def _frequencies(self, shape: tuple[int, ...], generator: torch.Generator) -> Tensor:
        """Independent one-dimensional frequencies of the spectral law: :math:`w = s z`."""
        return torch.randn(*shape, generator=generator, dtype=torch.float64) * self.spectrum.radial_scale(
            shape, generator
        )

    def _draw(self, generator: torch.Generator) -> dict[str, Tensor]:
        batch = tuple(self.batch_shape)
        draws = {"frequencies": self._frequencies((*batch, self.input_dim, self.features_per_dim // 2), generator)}
        if self.order == 2:
            draws["pair_frequencies"] = self._frequencies(
                (*batch, self.num_pairs, 2, self.features_per_pair // 2), generator
            )
        return draws

    def component_slices(self) -> tuple[slice, slice]:
        """The columns of the first-order and of the second-order (interaction) features in the root."""
        first = self.input_dim * self.features_per_dim
        return slice(0, first), slice(first, self.num_features)

    def _featurize(self, x: Tensor) -> Tensor:
        # (..., n, d, 1) * (*batch, d, m1) -> (..., n, d, m1): every dimension with its own frequencies.
        projections = x.unsqueeze(-1) * self.frequencies.unsqueeze(-3)
        first = cos_sin(projections, 1.0 / math.sqrt(self.features_per_dim // 2)).flatten(-2)
        if self.order == 1:
            return first
        pairs = x[..., self.pair_index]  # (..., n, P, 2)
        # u x_i + v x_j for every pair: (..., n, P, 2, 1) * (*batch, P, 2, m2) summed over the pair.
        pair_projections = (pairs.unsqueeze(-1) * self.pair_frequencies.unsqueeze(-4)).sum(-2)
        second = cos_sin(pair_projections, 1.0 / math.sqrt(self.features_per_pair // 2)).flatten(-2)
        return torch.cat([first, second.expand(*first.shape[:-1], second.size(-1))], dim=-1)

    # ------------------------------------------------------------------ closed forms
    def component_kernels(self, x1: Tensor, x2: Tensor) -> tuple[Tensor, Tensor]:
        r"""Row by row, :math:`\sum_j k(\Delta_j)` and :math:`\sum_{i<j} k(\Delta_i)k(\Delta_j)` (zero for order 1)."""
        per_dim = self.spectrum.profile((x1 - x2).abs())  # (..., n, d)
        first = per_dim.sum(-1)
        # The second elementary symmetric polynomial by Newton's identity: e2 = (e1^2 - p2) / 2.
        second = (first.square() - per_dim.square().sum(-1)) / 2 if self.order == 2 else torch.zeros_like(first)
        return first, second

    def _expected_kernel(self, x1: Tensor, x2: Tensor) -> Tensor:
        """The first-order kernel plus (order 2) the unweighted interaction kernel."""
        first, second = self.component_kernels(x1, x2)
        return first + second

    def component_variances(self, x1: Tensor, x2: Tensor) -> tuple[Tensor, Tensor]:
        r"""Closed-form variances of the first-order and interaction estimates, row by row.

        Components are drawn independently, so the variances add: dimension :math:`j` contributes
        :math:`\frac1{m_1}[(1 + k(2\Delta_j))/2 - k(\Delta_j)^2]` and pair :math:`(i, j)`
        :math:`\frac1{m_2}[(1 + k(2\Delta_i)k(2\Delta_j))/2 - k(\Delta_i)^2k(\Delta_j)^2]`
        (Sutherland & Schneider 2015, eq. 2, for the product kernel's spectral law).
        """
        delta = (x1 - x2).abs()
        k1, k2 = self.spectrum.profile(delta), self.spectrum.profile(2 * delta)
        first = fourier_iid_variance(k1, k2, self.features_per_dim // 2).sum(-1)
        if self.order == 1:
            return first, torch.zeros_like(first)
        i, j = self.pair_index[:, 0], self.pair_index[:, 1]
        pair_k1 = k1[..., i] * k1[..., j]
        pair_k2 = k2[..., i] * k2[..., j]
        second = fourier_iid_variance(pair_k1, pair_k2, self.features_per_pair // 2).sum(-1)
        return first, second

    def _variance(self, x1: Tensor, x2: Tensor, part: str) -> Tensor:
        first, second = self.component_variances(x1, x2)
        return first + second

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, kernel={self.kernel!r}, order={self.order}, "
            f"features_per_dim={self.features_per_dim}, features_per_pair={self.features_per_pair}"
        )
