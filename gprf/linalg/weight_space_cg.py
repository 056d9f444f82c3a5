r"""The marginal-likelihood terms of the capacitance :math:`C = I + G` by preconditioned conjugate gradients.

The feature-space marginal likelihood needs, per right-hand side column :math:`p` of the projection
:math:`P = \sqrt s\,R^\top\Sigma^{-1}Y` and for the Gram :math:`G = s\,R^\top\Sigma^{-1}R`,

.. math::
    p^\top C^{-1} p \quad\text{and}\quad \log\det C .

A Cholesky factor gives both in :math:`O(F^3)` (and its backward another :math:`O(F^3)`). Here one batched
preconditioned CG (Gardner et al., 2018) solves :math:`C[u, v_1..v_T] = [P, z_1..z_T]` in
:math:`O(\text{iterations}\cdot F^2(k+T))`, with a rank-:math:`r` Nyström preconditioner
:math:`\mathcal P = I + \hat G` (:class:`~gprf.linalg.nystrom_preconditioner.NystromPreconditioner`) and
probes :math:`z_j = \mathcal P^{1/2}w_j` for Rademacher :math:`w_j`. Then

* :math:`p^\top C^{-1}p = p^\top u`, with gradients :math:`\partial/\partial G = -uu^\top` and
  :math:`\partial/\partial p = 2u` (exact up to the CG tolerance);
* :math:`\log\det C = \log\det\mathcal P + \log\det M` with :math:`M = \mathcal P^{-1/2}C\mathcal P^{-1/2}`,
  the second term by stochastic Lanczos quadrature (Ubaru, Chen and Saad, 2017): the CG coefficients of probe
  :math:`j` are those of Lanczos on :math:`M` started at :math:`w_j`, so with its tridiagonal
  :math:`T_j = V\Theta V^\top`, :math:`\log\det M \approx \frac1T\sum_j \lVert w_j\rVert^2
  \sum_i V_{1i}^2\log\theta_i` (Hutchinson's estimator of :math:`\operatorname{tr}\log M`);
* :math:`\partial\log\det C/\partial G = C^{-1} \approx \mathcal P^{-1} + \frac1T\sum_j (v_j - y_j)y_j^\top`
  (symmetrised) with :math:`y_j = \mathcal P^{-1/2}w_j = \mathcal P^{-1}z_j`: Hutchinson's estimator of
  :math:`C^{-1} - \mathcal P^{-1}` with the exact :math:`\mathcal P^{-1}` as control variate. It is unbiased given
  exact solves because :math:`\mathbb E[\mathcal P^{1/2}ww^\top\mathcal P^{-1/2}] = I`, and its variance vanishes
  as :math:`\mathcal P \to C` (with :math:`v_j` alone it would not).

The preconditioner is a fixed (non-differentiated) function of the Gram: the gradient of the whole log-determinant
is carried by the estimate of :math:`C^{-1}`.

References:
    Gardner, J. R., Pleiss, G., Bindel, D., Weinberger, K. Q. and Wilson, A. G. (2018). GPyTorch: Blackbox
    matrix-matrix Gaussian process inference with GPU acceleration. *Advances in Neural Information Processing
    Systems 31*.

    Ubaru, S., Chen, J. and Saad, Y. (2017). Fast estimation of tr(f(A)) via stochastic Lanczos quadrature.
    *SIAM Journal on Matrix Analysis and Applications* 38(4), 1075–1099.

    Hutchinson, M. F. (1989). A stochastic estimator of the trace of the influence matrix for Laplacian smoothing
    splines. *Communications in Statistics – Simulation and Computation* 18(3), 1059–1076.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from gprf.exceptions import ConjugateGradientWarning
from gprf.linalg.capacitance import nonfinite_rows, raise_for_nonfinite_rows, weighted_sums
from gprf.linalg.feature_root import FeatureRoot
from gprf.linalg.nystrom_preconditioner import NystromPreconditioner


@dataclass(frozen=True)
class ConjugateGradientResult:
    """Solutions ``(*batch, F, m)`` of a batched preconditioned CG, with the coefficients of every iteration.

    ``alphas``, ``betas`` and ``active`` are ``(iterations, *batch, m)``: the step lengths, the direction updates
    and whether a column was still iterating (columns stop once their relative residual is below the tolerance).
    """

    solution: Tensor
    alphas: Tensor
    betas: Tensor
    active: Tensor
    converged: bool

    @property
    def steps(self) -> Tensor:
        """CG iterations per column ``(*batch, m)``."""
        return self.active.sum(0)


def preconditioned_cg(
    matmul: Callable[[Tensor], Tensor],
    rhs: Tensor,
    precondition: Callable[[Tensor], Tensor],
    tolerance: float,
    max_iterations: int,
    initial_guess: Tensor | None = None,
) -> ConjugateGradientResult:
    r"""Solve :math:`Ax = b` for every column of ``rhs`` ``(*batch, F, m)`` (:math:`A` symmetric positive definite).

    Column :math:`c` stops when :math:`\lVert b_c - Ax_c\rVert \le \text{tolerance}\,\lVert b_c\rVert`; checking
    that costs one host synchronisation per iteration (negligible next to the :math:`F^2m` product).
    """
    if initial_guess is None:
        solution = torch.zeros_like(rhs)
        residual = rhs
    else:
        solution = initial_guess
        residual = rhs - matmul(initial_guess)
    threshold = tolerance * torch.linalg.vector_norm(rhs, dim=-2)
    active = torch.linalg.vector_norm(residual, dim=-2) > threshold
    preconditioned = precondition(residual)
    direction = preconditioned
    energy = (residual * preconditioned).sum(-2)
    alphas, betas, actives = [], [], []
    for _ in range(max_iterations):
        if not bool(active.any()):
            break
        product = matmul(direction)
        curvature = (direction * product).sum(-2)
        # Finished columns take zero steps (and no 0/0 from their vanishing residuals).
        alpha = torch.where(active, energy / torch.where(active, curvature, 1), 0)
        solution = solution + alpha.unsqueeze(-2) * direction
        residual = residual - alpha.unsqueeze(-2) * product
        preconditioned = precondition(residual)
        next_energy = (residual * preconditioned).sum(-2)
        beta = torch.where(active, next_energy / torch.where(active, energy, 1), 0)
        direction = preconditioned + beta.unsqueeze(-2) * direction
        energy = next_energy
        alphas.append(alpha)
        betas.append(beta)
        actives.append(active)
        active = active & (torch.linalg.vector_norm(residual, dim=-2) > threshold)
    converged = not bool(active.any())
    empty = rhs.new_zeros(0, *rhs.shape[:-2], rhs.size(-1))
    return ConjugateGradientResult(
        solution,
        torch.stack(alphas) if alphas else empty,
        torch.stack(betas) if betas else empty,
        torch.stack(actives) if actives else empty.bool(),
        converged,
    )


def lanczos_log_quadrature(result: ConjugateGradientResult) -> Tensor:
    r""":math:`e_1^\top\log(T)\,e_1` per column ``(*batch, m)``, :math:`T` the Lanczos tridiagonal of the CG run.

    Preconditioned CG with step lengths :math:`\alpha_j` and direction updates :math:`\beta_j` is Lanczos on
    :math:`\mathcal P^{-1/2}A\mathcal P^{-1/2}` started at the normalised preconditioned initial residual, with
    :math:`T_{11} = 1/\alpha_1`, :math:`T_{jj} = 1/\alpha_j + \beta_{j-1}/\alpha_{j-1}` and
    :math:`T_{j,j-1} = \sqrt{\beta_{j-1}}/\alpha_{j-1}` (Saad, 2003, *Iterative Methods for Sparse Linear Systems*,
    2nd ed., SIAM, section 6.7.3). Gauss quadrature with :math:`T = V\Theta V^\top` gives
    :math:`e_1^\top\log(T)e_1 = \sum_i V_{1i}^2\log\theta_i`. Iterations after a column finished are padded with
    an identity block, which adds :math:`\log 1 = 0`.
    """
    alphas, betas, active = (t.movedim(0, -1) for t in (result.alphas, result.betas, result.active))
    safe_alphas = torch.where(active, alphas, 1)
    diagonal = 1 / safe_alphas
    diagonal = torch.cat([diagonal[..., :1], diagonal[..., 1:] + betas[..., :-1] / safe_alphas[..., :-1]], -1)
    diagonal = torch.where(active, diagonal, 1)
    off_diagonal = torch.where(active[..., 1:], betas[..., :-1].clamp_min(0).sqrt() / safe_alphas[..., :-1], 0)
    tridiagonal = (
        torch.diag_embed(diagonal)
        + torch.diag_embed(off_diagonal, offset=1)
        + torch.diag_embed(off_diagonal, offset=-1)
    )
    nodes, vectors = torch.linalg.eigh(tridiagonal)
    tiny = torch.finfo(nodes.dtype).tiny
    return (vectors[..., 0, :].square() * nodes.clamp_min(tiny).log()).sum(-1)


@dataclass
class WeightSpaceCGState:
    r"""A warm start for :func:`cg_inv_quad_logdet`, owned by the caller (one per model), and what the last solve did.

    Pass it to :class:`gprf.settings.weight_space_solver` (``state=``): each solve starts from the previous
    :math:`u = C^{-1}P` when the shapes agree and stores its own. Between two optimiser steps the hyperparameters
    move little, so :math:`u` does too and CG starts close to the answer. The state lives exactly as long as the
    caller keeps it (no module-level cache): sharing one between models of the same shape is harmless (a guess only
    changes the iteration count, never the result beyond the tolerance) but wastes its benefit.

    Attributes:
        solution: The last :math:`u = C^{-1}P` ``(*batch, F, k)`` (detached), or ``None``.
        iterations: CG iterations of the last solve (the slowest column), or ``None``.
        converged: Whether every column of the last solve reached the tolerance.
    """

    solution: Tensor | None = None
    iterations: int | None = None
    converged: bool | None = None

    def guess_for(self, projection: Tensor) -> Tensor | None:
        """The stored solution if it fits ``projection`` (shape, dtype, device), else ``None``."""
        stored = self.solution
        if stored is None or stored.shape != projection.shape:
            return None
        if stored.dtype != projection.dtype or stored.device != projection.device:
            return None
        return stored


@dataclass(frozen=True)
class CGTerms:
    r"""What :func:`cg_inv_quad_logdet` returns.

    Attributes:
        inv_quad: :math:`p_c^\top C^{-1}p_c` per column ``(*batch, k)``, or ``None`` without a projection.
        logdet: The estimate of :math:`\log\det C` ``(*batch)``, or ``None`` when not asked for.
        solution: :math:`u = C^{-1}P` ``(*batch, F, k)``, detached (the next call's ``initial_guess``), or ``None``.
        iterations: CG iterations of the slowest column.
        converged: Whether every column reached the tolerance within the iteration limit.
    """

    inv_quad: Tensor | None
    logdet: Tensor | None
    solution: Tensor | None
    iterations: int
    converged: bool


class _CGInvQuadLogdet(torch.autograd.Function):
    """Forward: one batched PCG over ``[P, P^{1/2} W]``. Backward: ``-u u^T``, ``2u`` and the estimate of ``C^{-1}``."""

    @staticmethod
    def forward(ctx, gram, projection, probes, preconditioner, initial_guess, tolerance, max_iterations):
        num_columns = projection.size(-1)
        rhs = torch.cat([projection, preconditioner.power_matmul(probes, 0.5)], -1)
        guess = None
        if initial_guess is not None:
            guess = torch.cat([initial_guess, torch.zeros_like(rhs[..., num_columns:])], -1)
        result = preconditioned_cg(lambda v: v + gram @ v, rhs, preconditioner.solve, tolerance, max_iterations, guess)
        solution, probe_solutions = result.solution[..., :num_columns], result.solution[..., num_columns:]
        inv_quad = (projection * solution).sum(-2)
        num_probes = probes.size(-1)
        if num_probes:
            # Rademacher probes: ||w_j||^2 = F.
            quadrature = lanczos_log_quadrature(result)[..., num_columns:]
            log_ratio = quadrature.mean(-1) * gram.size(-1)
        else:
            log_ratio = gram.new_zeros(gram.shape[:-2])
        duals = preconditioner.power_matmul(probes, -0.5)
        ctx.preconditioner = preconditioner
        ctx.save_for_backward(solution, probe_solutions, duals)
        steps = result.steps
        ctx.mark_non_differentiable(solution, steps)
        return inv_quad, log_ratio, solution, steps, torch.tensor(result.converged)

    @staticmethod
    def backward(ctx, grad_inv_quad, grad_log_ratio, *_):
        solution, probe_solutions, duals = ctx.saved_tensors
        grad_gram = grad_projection = None
        if ctx.needs_input_grad[0]:
            grad_gram = -(solution * grad_inv_quad.unsqueeze(-2)) @ solution.mT
            if duals.size(-1):
                # C^-1 = P^-1 + (C^-1 - P^-1): the first exactly, the (small) second by Hutchinson.
                correction = (probe_solutions - duals) @ duals.mT / duals.size(-1)
                inverse = ctx.preconditioner.dense_inverse() + (correction + correction.mT) / 2
                grad_gram = grad_gram + grad_log_ratio.unsqueeze(-1).unsqueeze(-1) * inverse
        if ctx.needs_input_grad[1]:
            grad_projection = 2 * solution * grad_inv_quad.unsqueeze(-2)
        return grad_gram, grad_projection, None, None, None, None, None


def cg_inv_quad_logdet(
    gram: Tensor,
    projection: Tensor | None = None,
    logdet: bool = True,
    *,
    tolerance: float = 1e-4,
    max_iterations: int = 1000,
    num_probes: int = 16,
    preconditioner_rank: int = 256,
    generator: torch.Generator | None = None,
    initial_guess: Tensor | None = None,
) -> CGTerms:
    r""":math:`P^\top C^{-1}P` (per column) and :math:`\log\det C` for :math:`C = I + G`, by preconditioned CG.

    Args:
        gram: :math:`G` ``(*batch, F, F)``, symmetric positive semi-definite (e.g. the Gram of
            :func:`gprf.linalg.weighted_sums`); differentiable.
        projection: :math:`P` ``(*batch, F, k)``, differentiable, or ``None`` for the log-determinant only.
        logdet: Whether to estimate :math:`\log\det C` (by ``num_probes`` probes).
        tolerance: Relative residual :math:`\lVert b - Cx\rVert/\lVert b\rVert` at which a column stops.
        max_iterations: Iteration limit; a solve that stops there warns with
            :class:`~gprf.exceptions.ConjugateGradientWarning`.
        num_probes: Rademacher probes :math:`T` of the log-determinant and its gradient (standard error
            :math:`\propto T^{-1/2}`).
        preconditioner_rank: Rank of the Nyström preconditioner (0: none).
        generator: The source of the preconditioner's sketch and of the probes (``None``: torch's global one).
        initial_guess: A guess of :math:`C^{-1}P` ``(*batch, F, k)`` (e.g. the previous ``solution``), or ``None``.

    Returns:
        :class:`CGTerms`. The inverse quadratic form and its gradients are exact up to the tolerance; the
        log-determinant and its gradient are unbiased estimates given converged solves.
    """
    if projection is None and not logdet:
        raise ValueError("cg_inv_quad_logdet has nothing to compute: pass a projection or logdet=True.")
    for name, value, low in (("max_iterations", max_iterations, 1), ("num_probes", num_probes, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{name} must be an integer of at least {low}, got {value!r}.")
    if not 0 < tolerance < 1:
        raise ValueError(f"tolerance is a relative residual in (0, 1), got {tolerance!r}.")
    batch_shape = (
        gram.shape[:-2] if projection is None else torch.broadcast_shapes(gram.shape[:-2], projection.shape[:-2])
    )
    num_features = gram.size(-1)
    gram = gram.expand(*batch_shape, num_features, num_features)
    has_projection = projection is not None
    if has_projection:
        projection = projection.expand(*batch_shape, *projection.shape[-2:])
    else:
        projection = gram.new_zeros(*batch_shape, num_features, 0)
    with torch.no_grad():
        preconditioner = NystromPreconditioner.from_gram(gram.detach(), preconditioner_rank, generator)
    probes = gram.new_zeros(*batch_shape, num_features, 0)
    if logdet:
        device = generator.device if generator is not None else gram.device
        bits = torch.randint(0, 2, (*batch_shape, num_features, num_probes), generator=generator, device=device)
        probes = (2 * bits - 1).to(device=gram.device, dtype=gram.dtype)
    if initial_guess is not None:
        initial_guess = initial_guess.detach().expand_as(projection)
    inv_quad, log_ratio, solution, steps, converged = _CGInvQuadLogdet.apply(
        gram, projection, probes, preconditioner, initial_guess, tolerance, max_iterations
    )
    iterations = int(steps.max()) if steps.numel() else 0
    if not bool(converged):
        warnings.warn(
            f"Conjugate gradients stopped at max_iterations={max_iterations} above the relative residual "
            f"{tolerance:g}; raise max_iterations or preconditioner_rank, or use the Cholesky solver "
            "(gprf.settings.weight_space_solver('cholesky')).",
            ConjugateGradientWarning,
            stacklevel=2,
        )
    return CGTerms(
        inv_quad if has_projection else None,
        preconditioner.logdet() + log_ratio if logdet else None,
        solution if has_projection else None,
        iterations,
        bool(converged),
    )


def cg_feature_space_terms(root: FeatureRoot, rhs: Tensor | None, logdet: bool, solver) -> tuple[Tensor | None, ...]:
    r"""``(P^T C^{-1} P per column, log det C)`` of a feature root with noise, by :func:`cg_inv_quad_logdet`.

    ``solver`` is the active :class:`gprf.settings.weight_space_solver` (its tolerances, probes, rank, probe seed
    and warm-start state). The Gram and projection come from :func:`gprf.linalg.weighted_sums` in the factor dtype
    (with their fused backward). Non-finite training rows raise
    :class:`~gprf.exceptions.NonFiniteTrainingDataError` with their count, as the Cholesky route does.
    """
    features = root.source  # a lazy root is summed over row chunks, never formed
    noise = root.noise.to(root.dtype)
    outputscale = None if root.outputscale is None else root.outputscale.to(root.dtype)
    gram, projection = weighted_sums(features, noise, rhs, outputscale)
    finite = torch.isfinite(gram).all()
    if projection is not None:
        finite = finite & torch.isfinite(projection).all()
    if not bool(finite):
        raise_for_nonfinite_rows(nonfinite_rows(features, noise, rhs))
    generator = None
    if solver.probe_seed is not None:
        generator = torch.Generator(device=gram.device).manual_seed(solver.probe_seed)
    state = solver.state
    terms = cg_inv_quad_logdet(
        gram,
        projection,
        logdet,
        tolerance=solver.tolerance,
        max_iterations=solver.max_iterations,
        num_probes=solver.num_probes,
        preconditioner_rank=solver.preconditioner_rank,
        generator=generator,
        initial_guess=None if state is None or projection is None else state.guess_for(projection),
    )
    if state is not None:
        state.solution, state.iterations, state.converged = terms.solution, terms.iterations, terms.converged
    return terms.inv_quad, terms.logdet
