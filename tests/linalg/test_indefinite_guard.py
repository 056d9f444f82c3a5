"""gprf.linalg.indefinite_guard: every operation that needs a PSD matrix raises IndefiniteKernelError (a ValueError)
naming the operation and what is supported instead; ridge-regression quadratic forms stay available."""

from __future__ import annotations

import pytest
import torch
from linear_operator.operators import DenseLinearOperator

from gprf.exceptions import IndefiniteKernelError
from gprf.linalg import IndefiniteGuard, indefinite_error
from gprf.linalg.indefinite_guard import diagonal_operator


class _GuardedDense(IndefiniteGuard, DenseLinearOperator):
    """The guard on a plain dense operator, as the indefinite operators use it."""


def _guarded() -> _GuardedDense:
    return _GuardedDense(torch.diag(torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)))


@pytest.mark.parametrize(
    ("operation", "match"),
    [
        (lambda op: op.cholesky(), "Cholesky"),
        (lambda op: op._cholesky(), "Cholesky"),
        (lambda op: op.root_decomposition(), "root decomposition"),
        (lambda op: op.root_inv_decomposition(), "root of the inverse"),
        (lambda op: op.zero_mean_mvn_samples(2), "Sampling"),
        (lambda op: op.sqrt_inv_matmul(torch.ones(3, 1, dtype=torch.float64)), "sqrt_inv_matmul"),
        (lambda op: op.logdet(), "log-determinant"),
        (lambda op: op.inv_quad_logdet(torch.ones(3, 1, dtype=torch.float64), logdet=True), "log-determinant"),
        (lambda op: op.solve(torch.ones(3, 1, dtype=torch.float64)), "alone"),
    ],
    ids=[
        "cholesky",
        "_cholesky",
        "root",
        "root_inv",
        "samples",
        "sqrt_inv_matmul",
        "logdet",
        "inv_quad_logdet",
        "solve",
    ],
)
def test_psd_operations_raise(operation, match):
    with pytest.raises(IndefiniteKernelError, match=match) as info:
        operation(_guarded())
    assert isinstance(info.value, ValueError) and "kernel.psd_part()" in str(info.value)


def test_inv_quad_logdet_without_the_log_determinant():
    operator = _guarded()
    assert operator.inv_quad_logdet(None, logdet=False) == (None, None)


def test_indefinite_error_names_the_operation():
    error = indefinite_error("Frobnication")
    assert isinstance(error, IndefiniteKernelError)
    assert str(error).startswith("Frobnication needs a positive semi-definite covariance")


@pytest.mark.parametrize(
    "diag",
    [torch.tensor(0.5), torch.tensor([0.5]), torch.tensor([0.1, 0.2, 0.3])],
    ids=["scalar", "trailing-one", "per-row"],
)
def test_diagonal_operator_expands_every_form_of_the_noise(diag):
    operator = diagonal_operator(_guarded(), diag.double())
    torch.testing.assert_close(operator.diagonal(), diag.double().expand(3))
