"""IndefinitePosteriorCovariance: the placeholder predictive covariance of an indefinite-kernel model — it has the
shape, dtype and device of a covariance, and every use of its values raises; linear_operator's LinearOperatorTestCase,
whose checks of values each assert the refusal."""

from __future__ import annotations

import unittest

import pytest
import torch
from linear_operator.test.linear_operator_test_case import LinearOperatorTestCase

from gprf.exceptions import IndefiniteKernelError
from gprf.linalg import IndefinitePosteriorCovariance


def test_shapes_only():
    reference = torch.zeros(2, 4, dtype=torch.float32)
    covariance = IndefinitePosteriorCovariance(reference)
    assert covariance.shape == (2, 4, 4) and covariance.dtype == torch.float32 and covariance.device == reference.device
    assert covariance.mT is covariance
    expanded = covariance.expand(3, 2, 4, 4)
    assert isinstance(expanded, IndefinitePosteriorCovariance) and expanded.shape == (3, 2, 4, 4)


@pytest.mark.parametrize(
    ("use", "match"),
    [
        (lambda c: c.to_dense(), "posterior covariance"),
        (lambda c: c.diagonal(), "posterior variance"),
        (lambda c: c @ torch.ones(4, 1), "posterior covariance"),
        (lambda c: c[0, torch.tensor([0, 1]), torch.tensor([1, 2])], "posterior covariance"),
        (lambda c: c.cholesky(), "Cholesky"),
    ],
    ids=["to_dense", "diagonal", "matmul", "indices", "cholesky"],
)
def test_every_use_raises(use, match):
    with pytest.raises(IndefiniteKernelError, match=match):
        use(IndefinitePosteriorCovariance(torch.zeros(2, 4)))


# ---------------------------------------------------------------------------------------- linear_operator's case
#: The checks of linear_operator's case that never read the covariance's values: they pass as they are.
SHAPE_CHECKS = {"test_double", "test_expand", "test_float", "test_half", "test_reshape", "test_solve_triangular"}
#: Checks of batch operations, which do nothing without batch dimensions (the batched placeholder's batch operations
#: are checked by test_batch_operations_keep_the_placeholder), and the sampling check, off as for every operator
#: without a sampler of its own (``should_test_sample``).
NO_OPERATION = {"test_permute", "test_prod", "test_transpose_batch", "test_sample"}
#: Checks that catch and log errors and then fail on the missing result: the refused operation is called directly.
DIRECT = {
    "test_cat_rows": lambda op: op.cat_rows(torch.zeros(1, op.size(-1)), torch.ones(1, 1)),
    "test_diagonalization": lambda op: op.diagonalization(),
    "test_diagonalization_symeig": lambda op: op.diagonalization(method="symeig"),
}
VALUE_CHECKS = sorted(
    name for name in dir(LinearOperatorTestCase) if name.startswith("test_") and name not in SHAPE_CHECKS | NO_OPERATION
)
REFUSED = "needs a positive semi-definite covariance"


def _refused_check(name: str):
    """linear_operator's check ``name`` (or the operation it calls, see DIRECT), asserted to stop at the refusal."""

    def check(self, *args, **kwargs):
        if args or kwargs:  # called with options by another check of the case, which asserts the refusal itself
            return getattr(LinearOperatorTestCase, name)(self, *args, **kwargs)
        with pytest.raises(IndefiniteKernelError, match=REFUSED):
            if name in DIRECT:
                DIRECT[name](self.create_linear_op())
            else:
                getattr(LinearOperatorTestCase, name)(self)

    check.__name__ = name
    check.__doc__ = (
        f"{name} reads the covariance's values, which the predictive of an indefinite-kernel model does not have "
        "(it is a placeholder of shapes): the operation is refused with IndefiniteKernelError."
    )
    return check


def _refusing(names):
    def decorate(cls):
        for name in names:
            setattr(cls, name, _refused_check(name))
        return cls

    return decorate


@_refusing(VALUE_CHECKS)
class TestIndefinitePosteriorCovarianceCase(LinearOperatorTestCase, unittest.TestCase):
    """linear_operator's checks on the placeholder: those of shapes and dtypes pass; every check that reads values
    asserts the refusal instead (see ``_refused_check``)."""

    seed = 0

    def create_linear_op(self):
        return IndefinitePosteriorCovariance(torch.zeros(5))

    def evaluate_linear_op(self, linear_op):
        # The placeholder has no values: its reference tensor broadcast to its shape, differentiable as the checks
        # need (they register gradient hooks), is a reference the refused checks never get to compare with.
        return linear_op.reference.unsqueeze(-1).expand(linear_op.shape)


def test_batch_operations_keep_the_placeholder():
    covariance = IndefinitePosteriorCovariance(torch.zeros(2, 3, 5))
    for name, result, shape in (
        ("permute", covariance.permute(1, 0, 2, 3), (3, 2, 5, 5)),
        ("transpose", torch.transpose(covariance, 0, 1), (3, 2, 5, 5)),
        ("unsqueeze", covariance.unsqueeze(0), (1, 2, 3, 5, 5)),
        ("batch member", covariance[1], (3, 5, 5)),
    ):
        assert isinstance(result, IndefinitePosteriorCovariance) and result.shape == shape, name
        with pytest.raises(IndefiniteKernelError, match="A posterior covariance"):
            result.to_dense()
    with pytest.raises(IndefiniteKernelError, match=REFUSED):
        torch.prod(covariance, -3)
