"""CapacitanceFactor: low-rank updates agree with refactoring C + U U^T from scratch."""

from __future__ import annotations

import pytest
import torch

from gprf.linalg import CapacitanceFactor


def _random_gram(f: int, seed: int, batch=()):
    r = torch.randn(*batch, 3 * f, f, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return r.mT @ r


@pytest.mark.parametrize("num_new", [1, 3, 40])  # 40 > F exercises a rank-deficient thin QR
def test_update_matches_direct_factorisation(num_new):
    f = 12
    gram = _random_gram(f, 0)
    factor = CapacitanceFactor.from_gram(gram)
    generator = torch.Generator().manual_seed(1)
    capacitance = gram + torch.eye(f, dtype=torch.float64)
    for _ in range(3):  # repeated updates compose
        u = torch.randn(f, num_new, generator=generator, dtype=torch.float64)
        factor = factor.update(u)
        capacitance = capacitance + u @ u.mT
    rhs = torch.randn(f, 4, generator=generator, dtype=torch.float64)
    torch.testing.assert_close(factor.solve(rhs), torch.linalg.solve(capacitance, rhs), rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(factor.logdet(), torch.logdet(capacitance), rtol=1e-10, atol=1e-10)
    # G^{-1} is a root of C^{-1}: (G^{-1})^T G^{-1} = C^{-1}.
    inv_root = factor.solve_root(torch.eye(f, dtype=torch.float64))
    torch.testing.assert_close(inv_root.mT @ inv_root, torch.linalg.inv(capacitance), rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(factor.solve_root_transpose(factor.solve_root(rhs)), factor.solve(rhs))


def test_batched_update_broadcasts_over_new_leading_dims():
    f = 6
    gram = _random_gram(f, 2, batch=(2,))
    factor = CapacitanceFactor.from_gram(gram)
    u = torch.randn(5, 2, f, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    updated = factor.update(u)
    rhs = torch.randn(f, 1, dtype=torch.float64)
    expected = torch.linalg.solve(gram + torch.eye(f, dtype=torch.float64) + u @ u.mT, rhs)
    torch.testing.assert_close(updated.solve(rhs), expected, rtol=1e-9, atol=1e-10)


def test_non_finite_gram_is_a_clear_error():
    gram = _random_gram(4, 4)
    gram[0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        CapacitanceFactor.from_gram(gram)


def test_solve_triangular_folds_extra_batch_dimensions():
    from gprf.linalg.capacitance import solve_triangular

    generator = torch.Generator().manual_seed(0)
    matrix = torch.randn(2, 5, 5, generator=generator, dtype=torch.float64)
    lower = torch.linalg.cholesky(matrix @ matrix.mT + 5 * torch.eye(5, dtype=torch.float64))
    rhs = torch.randn(7, 1, 5, 3, generator=generator, dtype=torch.float64)
    for upper, factor in ((False, lower), (True, lower.mT)):
        expected = torch.linalg.solve_triangular(factor, rhs, upper=upper)
        torch.testing.assert_close(solve_triangular(factor, rhs, upper=upper), expected, rtol=0, atol=1e-12)
