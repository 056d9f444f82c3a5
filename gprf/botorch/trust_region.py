r"""Trust regions for Thompson sampling in high dimensions: candidates in a box around the best point.

Global Thompson sampling in 20 or more dimensions draws its candidates from the whole cube, where almost every point
is far from the data and the posterior is close to the prior: the maximiser of a sample path is then mostly noise,
and a batch makes no progress. A trust region (TuRBO; Eriksson et al. 2019) keeps the candidates in a box centred
at the best point observed, with side lengths

.. math::
    L\,\frac{\ell_j}{(\prod_k \ell_k)^{1/d}}, \qquad j = 1, \dots, d,

proportional to the model's ARD lengthscales :math:`\ell` (normalised to geometric mean 1) and clipped to the unit
cube. The base length :math:`L` doubles after ``success_tolerance`` consecutive batches that improve the best value and
halves after ``failure_tolerance`` consecutive batches that do not; below ``min_length`` the region has collapsed and
the search should restart (:attr:`~gprf.botorch.TrustRegion.restart_needed`). Candidates are scrambled Sobol points in
the box of which only a random subset of coordinates (each with probability :math:`\min(1, 20/d)`) moves away from the
centre, as in TuRBO, so that in many dimensions most candidates stay close to the best point.

:func:`~gprf.botorch.thompson_sample` then draws one posterior sample path per batch point with BoTorch's
``draw_matheron_paths`` (for gprf models: the kernel's own features and the update in weight space,
:mod:`gprf.botorch.matheron`) and takes each path's best candidate not taken by an earlier path. Nothing here is
specific to gprf models beyond the lengthscale lookup; with a gprf model a batch of 100 paths over thousands of
candidates costs :math:`O(NF^2 + F^3 + SF^2 + SCF)` and no :math:`N\times N` or :math:`S\times N` matrix.

Reference:
    D. Eriksson, M. Pearce, J. R. Gardner, R. D. Turner, M. Poloczek. *Scalable Global Optimization via Local
    Bayesian Optimization.* Advances in Neural Information Processing Systems 32 (NeurIPS), 2019.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from botorch.models.model import Model
from botorch.sampling.pathwise import draw_matheron_paths
from gpytorch.kernels import Kernel
from torch import Tensor
from torch.quasirandom import SobolEngine

from gprf._checks import check_positive_int
from gprf.kernels import unwrap_scale_kernel


@dataclass
class TrustRegion:
    """The state of a TuRBO-style trust region for maximisation on the unit cube (module docstring).

    Every argument is checked at construction (a ``ValueError`` naming it otherwise).

    Args:
        dim: Input dimension :math:`d`, a positive integer.
        batch_size: Points evaluated per iteration :math:`q`, a positive integer (sets the default
            ``failure_tolerance``).
        length: Initial base side length :math:`L`.
        min_length: Below this the region has collapsed (:attr:`restart_needed`).
        max_length: The base length never grows past this. The lengths are finite numbers with
            ``0 < min_length <= length <= max_length``.
        success_tolerance: Consecutive improving batches that double :math:`L`, a positive integer.
        failure_tolerance: Consecutive batches without improvement that halve :math:`L`, a positive integer; default
            :math:`\\lceil\\max(4, d)/q\\rceil`, TuRBO's rule.
        improvement: Relative margin a batch's best value must beat the best so far by to count as a success, a
            finite number :math:`\\ge 0`.
        successes, failures: The counts so far, non-negative integers below their tolerances.
        best_value: The best value so far, a number that is not NaN or :math:`+\\infty`; :math:`-\\infty` (the
            default) until the initial design is recorded.
    """

    dim: int
    batch_size: int
    length: float = 0.8
    min_length: float = 0.5**7
    max_length: float = 1.6
    success_tolerance: int = 3
    failure_tolerance: int | None = None
    improvement: float = 1e-3
    successes: int = 0
    failures: int = 0
    best_value: float = -math.inf

    def __post_init__(self) -> None:
        for name in ("dim", "batch_size", "success_tolerance"):
            check_positive_int(getattr(self, name), f"TrustRegion: {name}")
        if self.failure_tolerance is None:
            self.failure_tolerance = math.ceil(max(4, self.dim) / self.batch_size)
        check_positive_int(self.failure_tolerance, "TrustRegion: failure_tolerance")
        for name in ("length", "min_length", "max_length", "improvement", "best_value"):
            setattr(self, name, _real(getattr(self, name), name))
        for name in ("length", "min_length", "max_length", "improvement"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"TrustRegion: {name} must be a finite number, got {getattr(self, name)!r}.")
        if not 0 < self.min_length <= self.length <= self.max_length:
            raise ValueError(
                "TrustRegion: the lengths must satisfy 0 < min_length <= length <= max_length, got "
                f"{self.min_length}, {self.length}, {self.max_length}."
            )
        if self.improvement < 0:
            raise ValueError(
                f"TrustRegion: improvement must be >= 0 (a negative margin counts worse batches as successes), got "
                f"{self.improvement}."
            )
        for name, tolerance in (("successes", "success_tolerance"), ("failures", "failure_tolerance")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < getattr(self, tolerance):
                raise ValueError(
                    f"TrustRegion: {name} must be an integer in [0, {tolerance}) = [0, {getattr(self, tolerance)}), "
                    f"got {value!r}."
                )
        if math.isnan(self.best_value) or self.best_value == math.inf:
            raise ValueError(
                f"TrustRegion: best_value must be a number below +inf (-inf: no value recorded yet), got "
                f"{self.best_value!r}."
            )

    @property
    def restart_needed(self) -> bool:
        """Whether the region has shrunk below ``min_length`` (start a new one, e.g. from a fresh design)."""
        return self.length < self.min_length

    def update(self, values: Tensor | Sequence[float]) -> None:
        """Record the objective values ``(q,)`` or ``(q, 1)`` of a new batch (maximisation) and resize the region.

        The first call records the initial design's best value without counting a success or a failure.

        NaN values mark failed evaluations and are ignored: the batch's best is that of its other values, and a batch
        of NaNs only counts as a batch without improvement (the initial design needs at least one value). Infinite
        values are refused: :math:`+\\infty` could never be improved upon, and the relative margin of an infinite
        best value is undefined.
        """
        try:
            values = torch.as_tensor(values).detach()
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                f"TrustRegion.update needs real objective values (a tensor or a sequence of numbers), got "
                f"{type(values).__name__}: {err}"
            ) from None
        if values.is_complex() or values.dtype == torch.bool:
            raise TypeError(f"TrustRegion.update needs real objective values, got dtype {values.dtype}.")
        if values.numel() == 0 or values.dim() > 2 or (values.dim() == 2 and values.size(-1) != 1):
            raise ValueError(
                f"TrustRegion.update needs the values of at least one evaluated point, shape (q,) or (q, 1) (one "
                f"objective: scalarise several outputs first), got shape {tuple(values.shape)}."
            )
        values = values.double().cpu().reshape(-1)
        observed = values[~values.isnan()]
        if bool(observed.isinf().any()):
            raise ValueError(
                "TrustRegion.update got an infinite objective value; pass finite values (NaN marks a failed "
                "evaluation, which is ignored)."
            )
        batch_best = observed.max().item() if observed.numel() > 0 else None
        if self.best_value == -math.inf:
            if batch_best is None:
                raise ValueError(
                    "TrustRegion.update: every value of the initial design is NaN; record at least one evaluated "
                    "point before the region can be centred."
                )
            self.best_value = batch_best
            return
        if batch_best is not None and batch_best > self.best_value + self.improvement * abs(self.best_value):
            self.successes, self.failures = self.successes + 1, 0
        else:
            self.successes, self.failures = 0, self.failures + 1
        if self.successes == self.success_tolerance:
            self.length, self.successes = min(2.0 * self.length, self.max_length), 0
        elif self.failures == self.failure_tolerance:
            self.length, self.failures = self.length / 2.0, 0
        if batch_best is not None:
            self.best_value = max(self.best_value, batch_best)

    def bounds(self, center: Tensor, lengthscale: Tensor | None = None) -> Tensor:
        """The box ``2 x d`` around ``center`` (a point of the unit cube), side lengths scaled by ``lengthscale``
        ``(d,)`` (positive and finite) normalised to geometric mean 1 (equal sides without it), clipped to the cube."""
        self._check_center(center)
        weights = torch.ones_like(center)
        if lengthscale is not None:
            lengthscale = torch.as_tensor(lengthscale).detach().to(center).reshape(-1)
            if lengthscale.numel() != self.dim:
                raise ValueError(f"lengthscale has {lengthscale.numel()} entries; the trust region has dim={self.dim}.")
            if not bool(((lengthscale > 0) & lengthscale.isfinite()).all()):
                raise ValueError(
                    f"lengthscale must be positive and finite in every dimension (the box's side ratios), got "
                    f"{lengthscale.tolist()}."
                )
            weights = lengthscale / lengthscale.log().mean().exp()
        half = weights * self.length / 2
        return torch.stack([(center - half).clamp(0, 1), (center + half).clamp(0, 1)])

    def candidates(
        self, center: Tensor, num_candidates: int, lengthscale: Tensor | None = None, seed: int | None = None
    ) -> Tensor:
        """``num_candidates x d`` points of the region: scrambled Sobol points in :meth:`bounds` of which each
        coordinate moves away from ``center`` with probability :math:`\\min(1, 20/d)` (at least one per point)."""
        check_positive_int(num_candidates, "num_candidates")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"seed must be an int or None, got {seed!r}.")
        lower, upper = self.bounds(center, lengthscale)
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        sobol = SobolEngine(self.dim, scramble=True, seed=None if seed is None else seed)
        points = sobol.draw(num_candidates, dtype=torch.float64).to(center)
        points = lower + (upper - lower) * points
        probability = min(1.0, 20.0 / self.dim)
        moved = torch.rand(num_candidates, self.dim, generator=generator, dtype=torch.float64) <= probability
        stuck = ~moved.any(-1)
        if stuck.any():  # every candidate moves in at least one coordinate
            columns = torch.randint(self.dim, (int(stuck.sum()),), generator=generator)
            moved[stuck.nonzero().squeeze(-1), columns] = True
        moved = moved.to(center.device)
        return torch.where(moved, points, center.expand_as(points))

    def _check_center(self, center: Tensor) -> None:
        if not torch.is_tensor(center) or not center.is_floating_point():
            raise TypeError(f"center must be a floating-point tensor of shape ({self.dim},), got {center!r}.")
        if center.dim() != 1 or center.numel() != self.dim:
            raise ValueError(f"center must be one point of shape ({self.dim},), got {tuple(center.shape)}.")
        if not bool(((center >= 0) & (center <= 1)).all()):  # NaN fails both comparisons
            raise ValueError(
                f"center must lie in the unit cube [0, 1]^d (trust regions are defined on it) and hold no NaN, got "
                f"{center.tolist()}."
            )


def _real(value: object, name: str) -> float:
    """``value`` as a float: a real number (``bool`` excluded) or a real tensor of one element."""
    if torch.is_tensor(value) and value.numel() == 1 and not value.is_complex() and value.dtype != torch.bool:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"TrustRegion: {name} must be a real number, got {value!r}.")
    return float(value)


def model_lengthscale(model: Model) -> Tensor | None:
    """The ARD lengthscales ``(d,)`` of ``model``'s covariance (the mean over outputs of batched models), or
    ``None`` when its kernel has no per-dimension lengthscale (the region is then a cube)."""
    kernel = getattr(model, "covar_module", None)
    if not isinstance(kernel, Kernel):
        return None
    base = unwrap_scale_kernel(kernel)
    lengthscale = getattr(base, "lengthscale", None) if getattr(base, "has_lengthscale", False) else None
    if lengthscale is None or lengthscale.size(-1) == 1:
        return None
    return lengthscale.detach().reshape(-1, lengthscale.size(-1)).mean(0)


def thompson_sample(model: Model, candidates: Tensor, num_samples: int) -> Tensor:
    """``num_samples x d`` distinct points of ``candidates`` ``(C, d)``: for each of ``num_samples`` posterior
    sample paths in turn, its best candidate not taken by an earlier path (maximisation; multi-output models are
    not supported here, pass a single-output model or a scalarised one).

    A model with batch dimensions (``model.batch_shape``: e.g. the fantasy model of ``model.fantasize``) is sampled
    per batch member, over the same candidates: the result is ``batch_shape x num_samples x d``, the paths of each
    member drawn from its own posterior (for a gprf model they share the prior draw, conditioned on each member's
    data).
    """
    if not torch.is_tensor(candidates) or not candidates.is_floating_point() or candidates.dim() != 2:
        shape = tuple(candidates.shape) if torch.is_tensor(candidates) else type(candidates).__name__
        raise ValueError(f"candidates must be a floating-point tensor of shape (C, d), got {shape}.")
    if bool(candidates.isnan().any()):
        raise ValueError("candidates hold NaN; pass points of the search space (e.g. TrustRegion.candidates).")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or not 1 <= num_samples <= len(candidates):
        raise ValueError(
            f"num_samples must be an integer between 1 and the {len(candidates)} candidates, got {num_samples!r}."
        )
    if model.num_outputs != 1:
        raise ValueError(f"thompson_sample needs a single-output model, got {model.num_outputs} outputs.")
    batch_shape = model.batch_shape
    with torch.no_grad():
        paths = draw_matheron_paths(model, sample_shape=torch.Size([num_samples]))
        values = paths(candidates)
    if values.numel() != num_samples * batch_shape.numel() * len(candidates):
        raise ValueError(
            f"The sample paths of this model gave values of shape {tuple(values.shape)} at {len(candidates)} "
            f"candidates; thompson_sample needs {num_samples} x batch_shape {tuple(batch_shape)} x {len(candidates)}."
        )
    values = values.reshape(num_samples, -1, len(candidates))  # paths x batch members x candidates
    if bool(values.isnan().any()):
        raise ValueError("The sample paths are NaN at some candidates; check the model's hyperparameters and data.")
    taken = torch.zeros(values.shape[1:], dtype=torch.bool, device=values.device)
    members = torch.arange(values.size(1), device=values.device)
    chosen = []
    for path_values in values:
        index = path_values.masked_fill(taken, -math.inf).argmax(-1)
        taken[members, index] = True
        chosen.append(index)
    indices = torch.stack(chosen, -1).to(candidates.device)  # batch members x paths
    return candidates[indices].reshape(*batch_shape, num_samples, candidates.size(-1))
