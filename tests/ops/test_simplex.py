"""Regular-simplex vertices and their O(d) projection."""

from __future__ import annotations

import pytest
import torch

from gprf.ops import simplex_project, simplex_vertices


@pytest.mark.parametrize("dim", [1, 2, 3, 7, 64])
def test_vertices_are_a_regular_simplex(dim):
    v = simplex_vertices(dim)
    assert v.shape == (dim, dim + 1)
    gram = v.mT @ v
    expected = torch.full((dim + 1, dim + 1), -1.0 / dim, dtype=torch.float64)
    expected.fill_diagonal_(1.0)
    torch.testing.assert_close(gram, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(v.sum(-1), torch.zeros(dim, dtype=torch.float64), rtol=0, atol=1e-12)


@pytest.mark.parametrize("dim", [1, 5, 16])
def test_project_matches_dense_product(dim, generator):
    u = torch.randn(3, 4, dim, generator=generator, dtype=torch.float64)
    torch.testing.assert_close(simplex_project(u), u @ simplex_vertices(dim), rtol=1e-12, atol=1e-12)


def test_project_is_linear_time_and_differentiable(generator):
    # O(d): a cumulative sum, no d x (d+1) matrix; check on a large d where a dense matrix would be 10^10 entries.
    u = torch.randn(2, 100_000, generator=generator, dtype=torch.float64, requires_grad=True)
    out = simplex_project(u)
    assert out.shape == (2, 100_001)
    torch.testing.assert_close(out.sum(-1), torch.zeros(2, dtype=torch.float64), rtol=0, atol=1e-9)
    out.pow(2).sum().backward()
    # sum_j (v_j^T u)^2 = u^T V V^T u = (d+1)/d |u|^2.
    d = u.size(-1)
    torch.testing.assert_close(u.grad, 2 * (d + 1) / d * u.detach(), rtol=1e-9, atol=1e-9)


def test_bad_dimension():
    with pytest.raises(ValueError, match="dim >= 1"):
        simplex_vertices(0)
