"""gprf's test kit, for code that extends gprf: the contracts gprf's own tests run, shipped for new feature maps,
kernels and operators.

* :class:`FeatureMapTestCase`: the feature-map contract as pytest checks a new map inherits
  (:mod:`gprf.testing.feature_maps`, with readers of maps of either kind);
* :class:`FeatureKernelTestCase` and :class:`InputDimKernelTestCase`: GPyTorch's ``BaseKernelTestCase`` for kernels
  built for an input dimension, plus the feature-kernel checks (:mod:`gprf.testing.kernels`);
* :class:`IndefiniteLinearOperatorTestCase` and :class:`IndefiniteAddedDiagLinearOperatorTestCase`:
  linear_operator's ``LinearOperatorTestCase`` for indefinite kernel matrices (:mod:`gprf.testing.linear_operators`);
* fixtures (``device``, ``dtype``, ``float64``, ``generator``, ``single_thread``; load them with
  ``pytest_plugins = ["gprf.testing.fixtures"]``), the seed :data:`~gprf.testing.fixtures.SEED` and
  :func:`default_dtype` (:mod:`gprf.testing.fixtures`);
* z-tests of Monte-Carlo estimates against closed forms (:mod:`gprf.testing.statistics`);
* a plain ``ExactGP`` around a kernel, data and training (:mod:`gprf.testing.models`).

The kit needs pytest (``pip install "gprf[test]"``). ``import gprf`` does not import it: import ``gprf.testing`` in
tests only.
"""

from gprf.testing.feature_maps import (
    FeatureMapTestCase,
    all_draws,
    assert_roots_equal,
    build_in,
    check_resample,
    kernel_estimate,
    paired_estimate,
    random_buffers,
    real_roots,
    roots_differ,
)
from gprf.testing.fixtures import DEVICES, DTYPES, SEED, default_dtype, requires_cuda
from gprf.testing.kernels import FeatureKernelTestCase, InputDimKernelTestCase, num_dims_of
from gprf.testing.linear_operators import (
    IndefiniteAddedDiagLinearOperatorTestCase,
    IndefiniteLinearOperatorTestCase,
    indefinite_factors,
)
from gprf.testing.models import ExactGPModel, regression_data, train_by_mll
from gprf.testing.statistics import assert_unbiased, diagonal_draws, mean_z_scores, z_bound

__all__ = [
    "DEVICES",
    "DTYPES",
    "SEED",
    "ExactGPModel",
    "FeatureKernelTestCase",
    "FeatureMapTestCase",
    "IndefiniteAddedDiagLinearOperatorTestCase",
    "IndefiniteLinearOperatorTestCase",
    "InputDimKernelTestCase",
    "all_draws",
    "assert_roots_equal",
    "assert_unbiased",
    "build_in",
    "check_resample",
    "default_dtype",
    "diagonal_draws",
    "indefinite_factors",
    "kernel_estimate",
    "mean_z_scores",
    "num_dims_of",
    "paired_estimate",
    "random_buffers",
    "real_roots",
    "regression_data",
    "requires_cuda",
    "roots_differ",
    "train_by_mll",
    "z_bound",
]
