"""IndefinitePosteriorCovariance: the placeholder predictive covariance of an indefinite-kernel model — it has the
shape, dtype and device of a covariance, and every use of its values raises."""

from __future__ import annotations

import pytest
import torch

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
