"""Random butterfly orthogonal matrices (Genz 1998)."""

from __future__ import annotations

import math

import pytest
import torch

from gprf.ops import butterfly_apply, butterfly_matrix, pad_to_power_of_two, random_butterfly
from gprf.ops.butterfly import butterfly_angles


@pytest.mark.parametrize("dim", [1, 2, 8, 64])
def test_orthogonal_to_machine_precision(dim, generator):
    angles, perms = random_butterfly((3,), dim, generator=generator)
    m = butterfly_matrix(angles, perms)
    eye = torch.eye(dim, dtype=torch.float64).expand(3, dim, dim)
    torch.testing.assert_close(m @ m.mT, eye, rtol=0, atol=1e-12)
    torch.testing.assert_close(m.mT @ m, eye, rtol=0, atol=1e-12)


@pytest.mark.parametrize("dim", [4, 32])
def test_fast_application_equals_dense_matrix(dim, generator):
    angles, perms = random_butterfly((2,), dim, generator=generator)
    m = butterfly_matrix(angles, perms)
    x = torch.randn(5, 2, dim, generator=generator, dtype=torch.float64)
    torch.testing.assert_close(
        butterfly_apply(x, angles, perms), (m @ x.unsqueeze(-1)).squeeze(-1), rtol=1e-12, atol=1e-12
    )
    torch.testing.assert_close(
        butterfly_apply(x, angles, perms, transpose=True), (m.mT @ x.unsqueeze(-1)).squeeze(-1), rtol=1e-12, atol=1e-12
    )


def test_first_column_is_the_generating_unit_vector(generator):
    # A single butterfly (identity permutation) maps e_1 to z/|z|: the Genz construction.
    z = torch.randn(16, generator=generator, dtype=torch.float64)
    angles = butterfly_angles(z).unsqueeze(0)
    m = butterfly_matrix(angles, torch.arange(16).unsqueeze(0))
    torch.testing.assert_close(m[:, 0], z / z.norm(), rtol=0, atol=1e-12)


def test_log_linear_storage_and_stages(generator):
    # O(d) parameters per round and log2(d) rotation stages: the application never forms a d x d matrix.
    dim = 1 << 14
    angles, perms = random_butterfly((), dim, rounds=1, generator=generator)
    assert angles.shape == (1, dim - 1) and perms.shape == (1, dim)
    x = torch.randn(dim, generator=generator, dtype=torch.float64)
    y = butterfly_apply(x, angles, perms)
    torch.testing.assert_close(y.norm(), x.norm(), rtol=1e-12, atol=0)
    torch.testing.assert_close(butterfly_apply(y, angles, perms, transpose=True), x, rtol=0, atol=1e-10)
    assert int(math.log2(dim)) == 14


def test_padding_non_powers_of_two(generator):
    x = torch.randn(3, 5, generator=generator, dtype=torch.float64)
    padded = pad_to_power_of_two(x)
    angles, perms = random_butterfly((), 8, generator=generator)
    y = butterfly_apply(padded, angles, perms)
    torch.testing.assert_close(y @ y.mT, x @ x.mT, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="power-of-two"):
        butterfly_apply(x, angles, perms)
    with pytest.raises(ValueError, match="power-of-two"):
        random_butterfly((), 6)
