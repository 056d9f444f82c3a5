r"""GPyTorch's kernel test case for kernels that need their input dimension, and the checks every gprf feature kernel
passes on top of it.

A new family's kernel tests subclass :class:`FeatureKernelTestCase` (with ``unittest.TestCase``, as GPyTorch's
own kernel tests do) and build the kernel from a fixed seed, so that two kernels built in one test share their
draws::

    import unittest

    from gprf.testing import SEED, FeatureKernelTestCase, num_dims_of


    class TestMyKernel(FeatureKernelTestCase, unittest.TestCase):
        def create_kernel_no_ard(self, **kwargs):
            return MyKernel(64, num_dims=num_dims_of(kwargs, 2), seed=SEED, **kwargs)

        def create_kernel_ard(self, num_dims, **kwargs):
            return MyKernel(64, num_dims=num_dims, ard_num_dims=num_dims, seed=SEED, **kwargs)
"""

from __future__ import annotations

import gpytorch
import torch
from gpytorch.test.base_kernel_test_case import BaseKernelTestCase

from gprf.distributions import MultivariateNormal
from gprf.kernels import FeatureKernel
from gprf.linalg import feature_root
from gprf.testing.models import ExactGPModel, regression_data


def num_dims_of(kwargs: dict, default: int) -> int:
    """The input dimension of a test kernel: ``kwargs["num_dims"]`` (removed from ``kwargs``), else the number of
    ``active_dims``, else ``default``. GPyTorch's test case passes ``active_dims`` without a dimension."""
    if "num_dims" in kwargs:
        return kwargs.pop("num_dims")
    active_dims = kwargs.get("active_dims")
    return len(active_dims) if active_dims is not None else default


class InputDimKernelTestCase(BaseKernelTestCase):
    """GPyTorch's ``BaseKernelTestCase`` for kernels that need their input dimension at construction.

    GPyTorch's active-dims tests build the reference kernel without arguments and let it infer its dimension on
    first use; random-feature kernels draw their features in ``__init__`` (and gprf's exact targets check the
    dimension), so the two tests are repeated here with the reference kernel built for the selected columns
    (``create_kernel_no_ard(num_dims=...)``, see :func:`num_dims_of`).
    """

    def _check_active_dims(self, active_dims):
        x = self.create_data_no_batch()
        kernel = self.create_kernel_no_ard(active_dims=active_dims)
        reference = self.create_kernel_no_ard(num_dims=len(active_dims))
        self.assertAllClose(
            kernel(x).evaluate_kernel().to_dense(),
            reference(x[:, active_dims]).evaluate_kernel().to_dense(),
            rtol=1e-3,
            atol=1e-5,
        )

    def test_active_dims_list(self):
        self._check_active_dims([0, 2, 4, 6])

    def test_active_dims_range(self):
        self._check_active_dims(list(range(3, 9)))


class FeatureKernelTestCase(InputDimKernelTestCase):
    r""":class:`InputDimKernelTestCase` plus what gprf's feature kernels (:class:`~gprf.kernels.FeatureKernel`,
    :math:`K = RR^\top`) promise: the training covariance hands off its feature root, cross covariances are the
    product of the roots, and the structured marginal likelihood equals the dense one, with gradients for every
    parameter."""

    def create_feature_kernel(self) -> FeatureKernel:
        """The kernel of ``create_kernel_no_ard`` on ``create_data_no_batch``'s dimension (GPyTorch's
        ``BaseKernelTestCase`` hooks), in float64."""
        kernel = self.create_kernel_no_ard(num_dims=self.create_data_no_batch().size(-1)).double()
        self.assertTrue(isinstance(kernel, FeatureKernel), f"{type(kernel).__name__} is not a gprf FeatureKernel")
        return kernel

    def test_training_covariance_hands_off_its_feature_root(self):
        kernel = self.create_feature_kernel()
        x = self.create_data_no_batch().double()
        covariance = kernel(x)
        root = feature_root(covariance)
        self.assertTrue(root is not None, "kernel(x) must evaluate to a FeatureRootLinearOperator")
        features = kernel.features(x)
        self.assertEqual(features.shape, torch.Size((x.size(-2), kernel.root_dim)))
        dense = features @ features.mT
        self.assertAllClose(root.scaled_features() @ root.scaled_features().mT, dense, rtol=1e-10, atol=1e-12)
        self.assertAllClose(covariance.to_dense(), dense, rtol=1e-10, atol=1e-12)
        self.assertAllClose(kernel(x, diag=True), dense.diagonal(), rtol=1e-10, atol=1e-12)

    def test_cross_covariance_is_the_product_of_the_roots(self):
        kernel = self.create_feature_kernel()
        x = self.create_data_no_batch().double()
        x1, x2 = x[:20], x[20:40]
        expected = kernel.features(x1) @ kernel.features(x2).mT
        self.assertAllClose(kernel(x1, x2).to_dense(), expected, rtol=1e-10, atol=1e-12)
        self.assertAllClose(kernel(x1, x2, diag=True), expected.diagonal(), rtol=1e-10, atol=1e-12)

    def test_marginal_likelihood_equals_the_dense_one_with_gradients(self):
        kernel = self.create_feature_kernel()
        x, y = regression_data(n=30, d=self.create_data_no_batch().size(-1))
        likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
        likelihood.noise = 0.1
        model = ExactGPModel(x, y, likelihood, kernel).double()
        model.train()
        prior = model(x)
        structured = MultivariateNormal(prior.mean, prior.lazy_covariance_matrix)
        log_density = likelihood(structured).log_prob(y)
        features = kernel.features(x).detach()
        covariance = features @ features.mT + likelihood.noise.detach() * torch.eye(x.size(-2), dtype=x.dtype)
        dense = torch.distributions.MultivariateNormal(prior.mean.detach(), covariance)
        self.assertAllClose(log_density.detach(), dense.log_prob(y), rtol=1e-8, atol=1e-8)
        log_density.backward()
        for name, parameter in model.named_parameters():
            if parameter.requires_grad:
                self.assertTrue(
                    parameter.grad is not None and bool(parameter.grad.isfinite().all()), f"gradient of {name}"
                )
