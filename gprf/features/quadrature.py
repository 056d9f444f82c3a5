r"""Quadrature-based features: stochastic spherical-radial rules SR(3,3) (Munkhoeva et al. 2018).

For :math:`k(x, y) = E_{w\sim N(0, I_d)} f_{xy}(w)` with :math:`f_{xy}(w) = g(w^\top x)^\top g(w^\top y)`,
one rule with a random rotation :math:`Q`, the ``d + 1`` unit vertices :math:`v_j` of a regular simplex
and one radius :math:`\rho_j\sim\chi_{d+2}` per node (Munkhoeva et al. 2018, §2.3, modified rule) is

.. math::
    SR(f) = \Big(1 - \sum_{j=1}^{d+1}\frac{d}{(d+1)\rho_j^2}\Big) f(0)
          + \frac{d}{d+1}\sum_{j=1}^{d+1}\frac{f(\rho_jQv_j) + f(-\rho_jQv_j)}{2\rho_j^2}.

The arc-cosine kernels are those of Cho & Saul (2009).

References:
    * M. Munkhoeva, Y. Kapushev, E. Burnaev, I. Oseledets. *Quadrature-based Features for Kernel Approximation.*
      Advances in Neural Information Processing Systems (NeurIPS), 2018.
    * Y. Cho, L. K. Saul. *Kernel Methods for Deep Learning.* Advances in Neural Information Processing Systems
      (NeurIPS), 2009.
"""

from __future__ import annotations

import math
import warnings

import torch
from scipy import stats
from torch import Tensor

from gprf._checks import check_choice, check_positive_int
from gprf.exceptions import InfiniteVarianceWarning
from gprf.features.base import FeatureMap
from gprf.ops import haar_orthogonal, next_power_of_two, pad_to_power_of_two
from gprf.ops.butterfly import butterfly_apply, random_butterfly
from gprf.ops.simplex import simplex_project

QUADRATURE_KERNELS = ("rbf", "arccos0", "arccos1")
QUADRATURE_ROTATIONS = ("haar", "butterfly")
BUTTERFLY_ROUNDS = 3


def arccos_kernel(x1: Tensor, x2: Tensor, order: int, diag: bool = False) -> Tensor:
    r"""Arc-cosine kernels of Cho & Saul (2009),
    :math:`k_n = 2E_{w\sim N(0,I)}[\Theta(w^\top x)\Theta(w^\top y)(w^\top x)^n(w^\top y)^n]`.

    :math:`k_0 = 1 - \theta/\pi`, :math:`k_1 = \lVert x\rVert\lVert y\rVert(\sin\theta + (\pi-\theta)\cos\theta)/\pi`,
    :math:`\theta` the angle between ``x`` and ``y``. A zero vector has angle :math:`\pi/2` with everything
    (``k_0 = 1/2``, the value of the estimator with :math:`\Theta(0) = 1/2`; ``k_1 = 0``).

    Reference: Y. Cho, L. K. Saul. *Kernel Methods for Deep Learning.* Advances in Neural Information Processing
    Systems (NeurIPS), 2009.

    Args:
        x1, x2: ``(..., n, d)`` and ``(..., m, d)``.
        order: 0 or 1.
        diag: Row-by-row values ``(..., n)`` (``n == m``) instead of the ``(..., n, m)`` matrix.
    """
    if order not in (0, 1):
        raise ValueError(f"order must be 0 or 1 for arc-cosine kernels, got {order!r}.")
    n1, n2 = x1.norm(dim=-1), x2.norm(dim=-1)
    if diag:
        dot, norms = (x1 * x2).sum(-1), n1 * n2
    else:
        dot, norms = x1 @ x2.mT, n1.unsqueeze(-1) * n2.unsqueeze(-2)
    safe = torch.where(norms > 0, norms, torch.ones_like(norms))
    cos = torch.where(norms > 0, dot / safe, torch.zeros_like(dot)).clamp(-1.0, 1.0)
    theta = torch.arccos(cos)
    if order == 0:
        return 1.0 - theta / math.pi
    return norms * (torch.sin(theta) + (math.pi - theta) * cos) / math.pi


class QuadratureFeatures(FeatureMap):
    r"""Quadrature-based random features SR(3,3) (Munkhoeva, Kapushev, Burnaev & Oseledets 2018).

    Features of one rule (with :math:`m_j = \rho_jQ^\top v_j`, :math:`\rho_j\sim\chi_{d+2}`,
    :math:`a_j = \sqrt{d/(d+1)}/\rho_j`, divided by :math:`\sqrt n` to average ``n = num_rules`` rules):

    * ``"rbf"`` (:math:`k = e^{-\lVert x-y\rVert^2/2}`, :math:`g = [\cos,\sin]`):
      :math:`a_j[\cos(m_j^\top x), \sin(m_j^\top x)]`. The reflected node is redundant because
      :math:`f(-m) = f(m) = \cos(m^\top(x-y))`, so its weight :math:`d/(2(d+1)\rho_j^2)` is merged into the
      node's (:math:`a_j^2 = d/((d+1)\rho_j^2)`).
    * ``"arccos0"`` / ``"arccos1"`` (Cho & Saul, :math:`k_n = E[2\,g(w^\top x)g(w^\top y)]`,
      :math:`g = \Theta` with :math:`\Theta(0) = 1/2`, resp. :math:`g = \max(0,\cdot)`):
      :math:`a_j[g(m_j^\top x), g(-m_j^\top x)]` (the factor 2 of the kernel cancels the 1/2 of the
      symmetric sum).

    **The** :math:`f(0)` **term.** :math:`f_{xy}(0) = g(0)^\top g(0)` does not depend on ``x`` or ``y``
    (1 for RBF, 1/2 for arccos0, 0 for arccos1) and, since :math:`E[1/\rho^2] = 1/d` for
    :math:`\rho^2\sim\chi^2_{d+2}`, its weight has expectation
    :math:`1 - (d+1)\frac{d}{d+1}\frac1d = 0`. It is folded analytically, i.e. replaced by its expectation
    zero: the estimate stays exactly unbiased, no constant feature is needed and no weight can be negative
    (keeping the term would need a constant feature :math:`\sqrt{w_0}` with :math:`w_0 < 0` for about half
    of the rules; resampling :math:`\rho` until :math:`w_0 \ge 0`, as in the paper, biases the estimate).
    Dropping it costs variance on near-diagonal entries of the RBF kernel (the kept term makes
    :math:`\hat k(x, x) = 1` exact); to keep that variance small the radii of a rule are stratified: the
    ``d + 1`` radii are :math:`F^{-1}_{\chi_{d+2}}((\pi_j + U_j)/(d+1))` with a random permutation
    :math:`\pi` and :math:`U_j\sim U(0,1)`, so every :math:`\rho_j` is still exactly :math:`\chi_{d+2}` and
    independent of :math:`Q` (unbiased), while :math:`\sum_j 1/\rho_j^2` is nearly constant.

    **Rotations.** ``"haar"``: :math:`Q` Haar orthogonal (dense, :math:`O(d^2)` per rule and point; exactly
    unbiased). ``"butterfly"``: :math:`Q` a product of three random butterfly matrices and permutations
    (:mod:`gprf.ops.butterfly`), :math:`O(d\log d)` per rule and point with inputs zero-padded to
    :math:`p = 2^{\lceil\log_2 d\rceil}` (the rule then integrates over :math:`N(0, I_p)`, whose first ``d``
    coordinates are :math:`N(0, I_d)`); :math:`Qv_j` is only approximately uniform on the sphere, so the
    estimate is unbiased up to that approximation. The node projections :math:`v_j^\top(Qx)` are computed
    in :math:`O(d)` by :func:`gprf.ops.simplex_project`.

    **Low dimensions.** The node weights have finite variance only for :math:`p > 2`
    (:math:`E[\rho^{-4}] = \infty` for :math:`\rho\sim\chi_{p+2}`, :math:`p \le 2`): for ``"rbf"`` and
    ``"arccos0"`` the estimate is then unbiased with infinite variance and a warning is issued
    (``"arccos1"`` is unaffected: its radii cancel, :math:`a_j\max(0, \rho_j t) = \sqrt{p/(p+1)}\max(0, t)`).
    Even for moderate ``p`` the folded :math:`f(0)` term makes RBF noisier than the paper's rule on the
    diagonal; the method shines for larger ``p`` (digits, ``p = 64``).

    **Feature count.** ``num_features = 2 * num_rules * (p + 1)`` with ``p = input_dim`` (``"haar"``) or
    the padded dimension (``"butterfly"``); the paper's ``2n(d+1) + 1`` minus the folded constant.

    References:
        * M. Munkhoeva, Y. Kapushev, E. Burnaev, I. Oseledets. *Quadrature-based Features for Kernel Approximation.*
          Advances in Neural Information Processing Systems (NeurIPS), 2018.
        * Y. Cho, L. K. Saul. *Kernel Methods for Deep Learning.* Advances in Neural Information Processing Systems
          (NeurIPS), 2009.

    Args:
        input_dim: Input dimension ``d`` (inputs already divided by any lengthscale).
        num_rules: Number ``n >= 1`` of independent SR(3,3) rules averaged.
        kernel: ``"rbf"``, ``"arccos0"`` or ``"arccos1"``.
        rotation: ``"haar"`` or ``"butterfly"``.
        batch_shape: Independent draws for each batch member.
        seed: Seed of the draws (``None``: seeded from torch's global generator state, which it does not advance).
    """

    nesting_refusal = (
        "its features come in whole quadrature rules (2 * (input_dim + 1) features each, with radii stratified "
        "within a rule), so num_features is not free; build a map with another num_rules, or use "
        "RandomFourierFeatures(sampler='orthogonal') for nested draws"
    )

    def __init__(
        self,
        input_dim: int,
        num_rules: int,
        kernel: str = "rbf",
        rotation: str = "haar",
        batch_shape: torch.Size | tuple[int, ...] = torch.Size(),
        seed: int | None = None,
    ) -> None:
        check_positive_int(input_dim, "input_dim")
        self.num_rules = check_positive_int(num_rules, "num_rules")
        self.kernel = check_choice(kernel, "kernel", QUADRATURE_KERNELS)
        self.rotation = check_choice(rotation, "rotation", QUADRATURE_ROTATIONS)
        self.rule_dim = next_power_of_two(input_dim) if rotation == "butterfly" else input_dim
        super().__init__(input_dim, 2 * num_rules * (self.rule_dim + 1), batch_shape=batch_shape, seed=seed)
        if self.rule_dim <= 2 and kernel != "arccos1":
            warnings.warn(
                f"QuadratureFeatures(kernel={kernel!r}) in dimension {self.rule_dim} <= 2 has infinite variance: the "
                "node weights d/((d+1) rho^2) with rho ~ chi_{d+2} have E[rho^-4] = inf for d <= 2. Use "
                "RandomFourierFeatures(sampler='orthogonal') (RBF) for such low dimensions.",
                InfiniteVarianceWarning,
                stacklevel=2,
            )
        self._register_draws()

    @staticmethod
    def features_per_rule(input_dim: int, rotation: str = "haar") -> int:
        """Number of features of one rule: ``2 (p + 1)`` (``p`` the possibly padded dimension)."""
        check_choice(rotation, "rotation", QUADRATURE_ROTATIONS)
        p = next_power_of_two(input_dim) if rotation == "butterfly" else input_dim
        return 2 * (p + 1)

    # ------------------------------------------------------------------ draws
    def _draw(self, generator: torch.Generator) -> dict[str, Tensor]:
        batch, n, p = self.batch_shape, self.num_rules, self.rule_dim
        draws: dict[str, Tensor] = {}
        if self.rotation == "haar":
            draws["rotations"] = haar_orthogonal((*batch, n), p, generator=generator)
        else:
            angles, permutations = random_butterfly((*batch, n), p, rounds=BUTTERFLY_ROUNDS, generator=generator)
            draws["angles"] = angles
            draws["permutations"] = permutations
        # Stratified radii: one stratum of the chi_{p+2} law per node, in random order.
        keys = torch.rand(*batch, n, p + 1, generator=generator, dtype=torch.float64)
        strata = torch.argsort(keys, dim=-1).to(torch.float64)
        uniform = (strata + torch.rand(*batch, n, p + 1, generator=generator, dtype=torch.float64)) / (p + 1)
        uniform = uniform.clamp(1e-300, 1.0 - 1e-16)
        draws["radii"] = torch.as_tensor(stats.chi.ppf(uniform.numpy(), df=p + 2), dtype=torch.float64)
        return draws

    # ------------------------------------------------------------------ features
    def projections(self, x: Tensor) -> Tensor:
        r"""Node projections :math:`m_j^\top x`, shape ``(..., num_rules, n, p + 1)``."""
        if self.rotation == "haar":
            rotated = x.unsqueeze(-3) @ self.rotations  # (..., rules, n, p): rows (Q^T x)^T = x^T Q
        else:
            padded = pad_to_power_of_two(x, dim=-1).unsqueeze(-3)  # (..., 1, n, p)
            rotated = butterfly_apply(padded, self.angles.unsqueeze(-3), self.permutations.unsqueeze(-3))
        return simplex_project(rotated) * self.radii.unsqueeze(-2)

    def _featurize(self, x: Tensor) -> Tensor:
        p = self.rule_dim
        projections = self.projections(x)
        weights = (math.sqrt(p / ((p + 1) * self.num_rules)) / self.radii).unsqueeze(-2)
        if self.kernel == "rbf":
            parts = (torch.cos(projections), torch.sin(projections))
        elif self.kernel == "arccos0":
            half = projections.new_tensor(0.5)
            parts = (torch.heaviside(projections, half), torch.heaviside(-projections, half))
        else:
            parts = (torch.relu(projections), torch.relu(-projections))
        features = torch.cat([weights * part for part in parts], dim=-1)  # (..., rules, n, 2(p+1))
        return features.movedim(-3, -2).flatten(-2)

    # ------------------------------------------------------------------ closed forms
    def _expected_kernel(self, x1: Tensor, x2: Tensor) -> Tensor:
        """The target kernel row by row (exact for ``rotation="haar"``)."""
        if self.kernel == "rbf":
            return torch.exp(-0.5 * ((x1 - x2) ** 2).sum(-1))
        return arccos_kernel(x1, x2, order=int(self.kernel[-1]), diag=True)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, num_rules={self.num_rules}, kernel={self.kernel!r}, rotation={self.rotation!r}"
