r"""Stochastic Lanczos quadrature (linear_operator's log-determinant estimate) under fixed settings, and the standard
deviation that bounds it.

linear_operator estimates :math:`\log\det K` with a preconditioner :math:`P = LL^\top` as :math:`N` times the mean of
:math:`u^\top \log(A)\,u`, :math:`A = L^{-1}KL^{-\top}`, over :math:`S` probes :math:`u` uniform on the sphere
(:math:`z \sim N(0, P)` whitened and normalised): variance :math:`2N^2\,\mathrm{var}(\log\lambda(A)) / ((N + 2)S)`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import gpytorch
import torch


def slq_logdet_sd(covariance: torch.Tensor, preconditioner: torch.Tensor, num_probes: int) -> float:
    """The standard deviation of the estimate of ``log det(covariance)`` (dense, ``N x N``) preconditioned by the
    dense ``preconditioner``, over ``num_probes`` probes."""
    with torch.no_grad():
        cholesky = torch.linalg.cholesky(preconditioner)
        whitened = torch.linalg.solve_triangular(cholesky, covariance, upper=False)
        log_eigenvalues = torch.linalg.eigvalsh(torch.linalg.solve_triangular(cholesky, whitened.mT, upper=False)).log()
    n = covariance.size(-1)
    return math.sqrt(2 * n**2 * log_eigenvalues.var(correction=0).item() / ((n + 2) * num_probes))


@contextmanager
def seeded_slq(num_probes: int, num_points: int) -> Iterator[None]:
    """No Cholesky, ``num_probes`` probes, a full Lanczos run over ``num_points`` points and tight CG, without
    gradients and with torch seeded 0 inside a forked RNG (the caller's generator is untouched)."""
    with (
        torch.random.fork_rng(),
        gpytorch.settings.max_cholesky_size(0),
        gpytorch.settings.num_trace_samples(num_probes),
        gpytorch.settings.max_lanczos_quadrature_iterations(num_points),
        gpytorch.settings.cg_tolerance(1e-8),
        torch.no_grad(),
    ):
        torch.manual_seed(0)
        yield
