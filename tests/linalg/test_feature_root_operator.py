"""FeatureRootLinearOperator: K = s R R^T keeps its hand-off through the operations GPyTorch applies to it, sums and
exact products of feature roots stay feature roots, every dense combination with another covariance warns, and it
passes linear_operator's LinearOperatorTestCase (of full rank) and RectangularLinearOperatorTestCase (of low rank)."""

from __future__ import annotations

import dataclasses
import unittest
import warnings

import linear_operator
import pytest
import torch
from linear_operator import to_dense
from linear_operator.operators import (
    ConstantDiagLinearOperator,
    DenseLinearOperator,
    DiagLinearOperator,
    LowRankRootLinearOperator,
    MulLinearOperator,
)
from linear_operator.test.linear_operator_test_case import LinearOperatorTestCase, RectangularLinearOperatorTestCase

from gprf.exceptions import LowRankStructureWarning
from gprf.features.nested import next_draw_version
from gprf.linalg import FeatureRootAddedDiagLinearOperator, FeatureRootLinearOperator, feature_root


def _operator(batch=(2,), n=6, f=4, with_inputs=True, versions=(4,)):
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(*batch, n, f, generator=generator, dtype=torch.float64)
    outputscale = 0.5 + torch.rand(batch, generator=generator, dtype=torch.float64)
    inputs = torch.randn(*batch, n, 3, generator=generator, dtype=torch.float64) if with_inputs else None
    return FeatureRootLinearOperator(features, outputscale=outputscale, inputs=inputs, versions=versions)


def _dense(operator):
    root = feature_root(operator)
    return root.outputscale[..., None, None] * root.features @ root.features.mT


def test_values_and_the_low_rank_root():
    operator = _operator()
    expected = _dense(operator)
    torch.testing.assert_close(operator.to_dense(), expected)
    torch.testing.assert_close(operator.diagonal(), expected.diagonal(dim1=-2, dim2=-1))
    rhs = torch.randn(2, 6, 3, dtype=torch.float64)
    torch.testing.assert_close(operator @ rhs, expected @ rhs)
    assert isinstance(operator, LowRankRootLinearOperator)  # sampling and root decompositions keep working
    root = operator.root_decomposition().root.to_dense()
    torch.testing.assert_close(root @ root.mT, expected)


def test_scaling_multiplies_the_amplitude_and_keeps_the_root():
    operator = _operator()
    scaled = operator.mul(torch.tensor([2.0, 3.0], dtype=torch.float64).view(2, 1, 1))  # as ScaleKernel does
    assert isinstance(scaled, FeatureRootLinearOperator)
    root, scaled_root = operator.feature_root, scaled.feature_root
    assert scaled_root.source is root.source and scaled_root.inputs is root.inputs and scaled_root.versions == (4,)
    factors = torch.tensor([2.0, 3.0], dtype=torch.float64)
    torch.testing.assert_close(scaled_root.outputscale, root.outputscale * factors)
    # Exact for any sign (no square root taken): the negated matrix, e.g. in a difference of covariances.
    torch.testing.assert_close((operator * -1.0).to_dense(), -_dense(operator))


@pytest.mark.parametrize(
    "transform",
    [
        lambda op: op.expand(3, 2, 6, 6),
        lambda op: op.unsqueeze(0),
        lambda op: op.expand(3, 2, 6, 6).permute(1, 0, 2, 3),
        lambda op: op[1],
        lambda op: op[..., 1:4, 1:4],
    ],
    ids=["expand", "unsqueeze", "permute", "batch-index", "same-rows"],
)
def test_batch_and_row_operations_keep_the_hand_off(transform):
    operator = _operator()
    result = transform(operator)
    assert isinstance(result, FeatureRootLinearOperator)
    root = feature_root(result)
    assert root.inputs is not None and root.inputs.shape[:-1] == root.features.shape[:-1] and root.versions == (4,)
    torch.testing.assert_close(result.to_dense(), transform(_dense(operator)))


def test_other_indexing_is_exact_without_the_hand_off():
    operator = _operator()
    block = operator[..., :2, 3:]
    torch.testing.assert_close(block.to_dense(), _dense(operator)[..., :2, 3:])
    assert not isinstance(block, FeatureRootLinearOperator)


def test_linear_operator_rebuilds_keep_every_part():
    operator = _operator()
    for rebuilt in (operator.clone(), operator.detach(), operator.to(torch.float32), operator.evaluate_kernel()):
        root = rebuilt.feature_root
        assert isinstance(rebuilt, FeatureRootLinearOperator) and root.versions == (4,)
        assert root.inputs is not None and root.outputscale is not None
        torch.testing.assert_close(rebuilt.to_dense().double(), _dense(operator), rtol=1e-6, atol=1e-6)


def test_the_hand_off_round_trips_and_noise_is_refused():
    operator = _operator()
    root = operator.feature_root
    again = FeatureRootLinearOperator.from_root(root).feature_root
    for part in dataclasses.fields(root):
        value, expected = getattr(again, part.name), getattr(root, part.name)
        assert torch.equal(value, expected) if torch.is_tensor(expected) else value == expected, part.name
    with pytest.raises(ValueError, match="add_diagonal"):
        FeatureRootLinearOperator(operator.feature_root.source, noise=torch.ones(2, 6, dtype=torch.float64))


@pytest.mark.parametrize(
    "noise",
    [torch.tensor(0.3, dtype=torch.float64), torch.full((2, 1), 0.3, dtype=torch.float64)],
    ids=["scalar", "per-batch"],
)
def test_adding_noise_gives_the_structured_operator(noise):
    operator = _operator(versions=(next_draw_version(),))  # a draw of its own: the dense warning comes once per draw
    added = operator.add_diagonal(noise)
    assert isinstance(added, FeatureRootAddedDiagLinearOperator)
    assert isinstance(added._diag_tensor, ConstantDiagLinearOperator)  # one variance: no N-vector
    assert added.feature_root.noise.shape == (2, 1)
    per_row = operator + DiagLinearOperator(torch.full((2, 6), 0.3, dtype=torch.float64))
    assert isinstance(per_row, FeatureRootAddedDiagLinearOperator) and per_row.feature_root.noise.shape == (2, 6)
    with pytest.warns(LowRankStructureWarning, match="dense 6 x 6") as caught:  # N > F: worth a warning
        torch.testing.assert_close(added.to_dense(), per_row.to_dense())
    assert len([w for w in caught if issubclass(w.category, LowRankStructureWarning)]) == 1  # once per draw
    jittered = added.add_diagonal(torch.tensor(0.1, dtype=torch.float64))
    assert isinstance(jittered, FeatureRootAddedDiagLinearOperator)
    torch.testing.assert_close(jittered.feature_root.noise.expand(2, 6), torch.full((2, 6), 0.4, dtype=torch.float64))


# ---------------------------------------------------------------------------------------- linear_operator's case
def _evaluate(linear_op) -> torch.Tensor:
    """s R R^T from the operator's hand-off (the root and amplitude tensors themselves, so gradients reach them)."""
    root = feature_root(linear_op)
    return root.outputscale[..., None, None] * root.features @ root.features.mT


class TestFeatureRootOperatorCase(LinearOperatorTestCase, unittest.TestCase):
    """linear_operator's checks on K = s R R^T of full rank (F = 8 > N = 5 features, so solves and log-determinants
    exist), with scaled inputs riding along as localized prediction has them."""

    seed = 0
    batch_shape = ()
    # The root decomposition is the feature root itself: no Lanczos iteration is run.
    should_call_lanczos = False

    def setUp(self):
        # linear_operator solves by conjugate gradients (which the case checks is called) only while fast solves are
        # on; importing BoTorch, as other tests in the same process do, switches them off by default.
        fast_solves = linear_operator.settings.fast_computations(solves=True)
        fast_solves.__enter__()
        self.addCleanup(fast_solves.__exit__, None, None, None)
        super().setUp()

    def create_linear_op(self):
        features = torch.randn(*self.batch_shape, 5, 8)
        outputscale = 0.5 + torch.rand(self.batch_shape)
        return FeatureRootLinearOperator(
            features, outputscale=outputscale, inputs=torch.randn(*self.batch_shape, 5, 3), versions=(4,)
        )

    def evaluate_linear_op(self, linear_op):
        return _evaluate(linear_op)


class TestFeatureRootOperatorCaseBatch(TestFeatureRootOperatorCase):
    seed = 1
    batch_shape = (3,)


class TestFeatureRootOperatorCaseMultiBatch(TestFeatureRootOperatorCase):
    seed = 2
    batch_shape = (2, 3)


class TestLowRankFeatureRootOperatorCase(RectangularLinearOperatorTestCase, unittest.TestCase):
    """linear_operator's checks of products, indexing and batch operations on K = s R R^T of low rank (F = 2 < N = 5,
    the usual case): singular, so the square-matrix checks that solve or factor do not apply (linear_operator tests its
    LowRankRootLinearOperator this way too); the sum with noise runs them
    (tests/linalg/test_feature_root_added_diag_operator.py)."""

    seed = 3

    def create_linear_op(self):
        return FeatureRootLinearOperator(torch.randn(2, 3, 5, 2), outputscale=0.5 + torch.rand(2, 3))

    def evaluate_linear_op(self, linear_op):
        return _evaluate(linear_op)


def test_gpytorch_sums_and_exact_products_keep_a_feature_root():
    first = _operator()
    generator = torch.Generator().manual_seed(5)
    second = FeatureRootLinearOperator(torch.randn(2, 6, 3, generator=generator, dtype=torch.float64), versions=(7,))
    exact = FeatureRootLinearOperator(torch.randn(6, 2, generator=generator, dtype=torch.float64))  # no random draws
    total = first + second
    assert isinstance(total, FeatureRootLinearOperator) and total.feature_root.versions == (4, 7)
    torch.testing.assert_close(total._dense(), _dense(first) + second._dense(), rtol=1e-12, atol=1e-12)
    product = first * exact  # an exact root enters by the exact Kronecker product
    assert isinstance(product, FeatureRootLinearOperator) and product.feature_root.num_columns == 8
    torch.testing.assert_close(product._dense(), _dense(first) * exact._dense(), rtol=1e-12, atol=1e-12)


def test_scaling_keeps_the_origin_and_other_rebuilds_drop_it():
    origin = object()
    operator = FeatureRootLinearOperator(torch.ones(5, 2, dtype=torch.float64), origin=origin)
    assert operator.mul(torch.tensor(2.0, dtype=torch.float64)).origin is origin
    assert operator.clone().origin is origin  # linear_operator's rebuilds keep the constructor arguments
    assert operator[1:3, 1:3].origin is None


def _dense_spellings():
    """A feature root combined with a dense covariance in every order GPyTorch's algebra produces."""
    feature = _operator(batch=())
    dense = DenseLinearOperator(torch.eye(6, dtype=torch.float64) + 0.5)
    random = FeatureRootLinearOperator(torch.ones(6, 3, dtype=torch.float64), versions=(9,))
    return {
        "feature + dense": (lambda: feature + dense, "Adding a DenseLinearOperator"),
        "dense + feature": (lambda: (dense + feature).to_dense(), "GPyTorch adding a random-feature covariance"),
        "feature * dense": (lambda: feature * dense, "elementwise by a DenseLinearOperator"),
        "dense * feature": (lambda: dense * feature, "Forming the dense 6 x 6 matrix"),
        "task first": (lambda: MulLinearOperator(dense, feature), "GPyTorch multiplying a covariance without"),
        "unknown random roots": (lambda: feature * random, "whose kernel is unknown"),
    }


DENSE_SPELLINGS = (
    "feature + dense",
    "dense + feature",
    "feature * dense",
    "dense * feature",
    "task first",
    "unknown random roots",
)


@pytest.mark.parametrize("spelling", DENSE_SPELLINGS)
def test_every_dense_combination_warns_and_is_exact(spelling):
    combine, message = _dense_spellings()[spelling]
    with pytest.warns(LowRankStructureWarning, match=message):
        result = combine()
    assert not isinstance(result, FeatureRootLinearOperator)
    feature, other = _operator(batch=()), torch.eye(6, dtype=torch.float64) + 0.5
    if spelling != "unknown random roots":
        expected = _dense(feature) * other if "*" in spelling or spelling == "task first" else _dense(feature) + other
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LowRankStructureWarning)
            torch.testing.assert_close(to_dense(result), expected, rtol=1e-12, atol=1e-12)
