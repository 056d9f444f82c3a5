"""gprf.testing.kernels: the input dimension of test kernels, and the feature-kernel checks catching a kernel that
breaks them (the checks passing on every gprf feature kernel are the kernel tests' FeatureKernelTestCase classes)."""

from __future__ import annotations

import unittest

import pytest

from gprf.kernels import RandomFourierKernel
from gprf.testing import SEED, FeatureKernelTestCase, num_dims_of


@pytest.mark.parametrize(
    ("kwargs", "expected", "left"),
    [
        ({"num_dims": 3, "batch_shape": (2,)}, 3, {"batch_shape": (2,)}),
        ({"active_dims": [0, 2]}, 2, {"active_dims": [0, 2]}),
        ({}, 5, {}),
    ],
)
def test_num_dims_of(kwargs, expected, left):
    assert num_dims_of(kwargs, 5) == expected
    assert kwargs == left  # num_dims is taken out; active_dims stays for the kernel


class _DenseTrainingCovariance(RandomFourierKernel):
    """Returns K(X, X) as a dense tensor: the prediction strategies and the marginal likelihood lose the root."""

    def forward(self, x1, x2, diag=False, **params):
        result = super().forward(x1, x2, diag=diag, **params)
        return result if diag else result.to_dense()


def _case(kernel_class: type[RandomFourierKernel]) -> FeatureKernelTestCase:
    class Case(FeatureKernelTestCase, unittest.TestCase):
        def create_kernel_no_ard(self, **kwargs):
            return kernel_class(32, num_dims=num_dims_of(kwargs, 2), seed=SEED, **kwargs)

    return Case("test_training_covariance_hands_off_its_feature_root")


def test_the_checks_pass_a_feature_kernel():
    case = _case(RandomFourierKernel)
    case.test_training_covariance_hands_off_its_feature_root()
    case.test_cross_covariance_is_the_product_of_the_roots()
    case.test_marginal_likelihood_equals_the_dense_one_with_gradients()


def test_the_checks_catch_a_kernel_without_the_hand_off():
    with pytest.raises(AssertionError, match="must evaluate to a FeatureRootLinearOperator"):
        _case(_DenseTrainingCovariance).test_training_covariance_hands_off_its_feature_root()
