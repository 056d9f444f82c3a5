"""SignedRandomFeatureKernel (GRFF/GORF): GPyTorch's BaseKernelTestCase for both samplers, the exact indefinite
targets it is tied to, spectra on the sphere (no lengthscale), state_dict, pickling and devices."""

from __future__ import annotations

import pickle
import unittest

import pytest
import torch
from gpytorch.kernels import ScaleKernel

from gprf.features import spherical_polynomial_spectrum
from gprf.kernels import DeltaGaussianKernel, SignedRandomFeatureKernel, SphericalPolynomialKernel
from gprf.testing import SEED, InputDimKernelTestCase, num_dims_of, regression_data
from tests.helpers.regression import SPECTRUM, signed_kernel


class TestSignedKernel(InputDimKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        return SignedRandomFeatureKernel(32, SPECTRUM, num_dims=num_dims_of(kwargs, 2), seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return SignedRandomFeatureKernel(32, SPECTRUM, num_dims=num_dims, ard_num_dims=num_dims, seed=SEED, **kwargs)


class TestOrthogonalSignedKernel(TestSignedKernel):
    def create_kernel_no_ard(self, **kwargs):
        return SignedRandomFeatureKernel(
            32, SPECTRUM, num_dims_of(kwargs, 2), sampler="orthogonal", seed=SEED, **kwargs
        )

    def create_kernel_ard(self, num_dims, **kwargs):
        return SignedRandomFeatureKernel(
            32, SPECTRUM, num_dims, sampler="orthogonal", ard_num_dims=num_dims, seed=SEED, **kwargs
        )


def test_exact_targets():
    x, _ = regression_data(20)
    kernel = signed_kernel().base_kernel
    exact = kernel.exact()
    assert isinstance(exact, DeltaGaussianKernel) and exact.raw_lengthscale is kernel.raw_lengthscale
    z = x / kernel.lengthscale
    torch.testing.assert_close(exact(x[:10], x[10:], diag=True), kernel.feature_map.expected_kernel(z[:10], z[10:]))
    kernel.lengthscale = torch.tensor([1.0, 0.5, 2.0], dtype=torch.float64)
    torch.testing.assert_close(exact.lengthscale, kernel.lengthscale)


def test_spherical_kernel():
    generator = torch.Generator().manual_seed(2)
    x = torch.nn.functional.normalize(torch.randn(25, 4, generator=generator, dtype=torch.float64), dim=-1)
    spectrum = spherical_polynomial_spectrum(2.0, 3, 4, truncation=40.0)
    kernel = SignedRandomFeatureKernel(64, spectrum, num_dims=4, sampler="orthogonal", seed=0).double()
    torch.testing.assert_close(kernel.lengthscale, torch.ones(1, 1, dtype=torch.float64))
    assert not kernel.raw_lengthscale.requires_grad
    exact = kernel.exact()
    assert isinstance(exact, SphericalPolynomialKernel) and (exact.a, exact.degree) == (2.0, 3)
    torch.testing.assert_close(exact(x).to_dense(), ((1 + x @ x.mT) / 2) ** 3)
    with pytest.raises(ValueError, match="unit sphere"):
        kernel(2 * x).to_dense()


def test_state_dict_pickle_and_device(device):
    x, _ = regression_data(20)
    x = x.to(device)
    kernel = signed_kernel().to(device)
    fresh = ScaleKernel(SignedRandomFeatureKernel(48, SPECTRUM, num_dims=3, ard_num_dims=3, seed=5)).double().to(device)
    assert not torch.allclose(fresh(x).to_dense(), kernel(x).to_dense())
    fresh.load_state_dict(kernel.state_dict())
    torch.testing.assert_close(fresh(x).to_dense(), kernel(x).to_dense())
    clone = pickle.loads(pickle.dumps(kernel))
    torch.testing.assert_close(clone(x).to_dense(), kernel(x).to_dense())
    assert kernel(x).to_dense().device.type == device.type


def test_bad_input():
    with pytest.raises(ValueError, match="num_dims"):
        SignedRandomFeatureKernel(8, SPECTRUM)
    with pytest.raises(ValueError, match="'iid', 'orthogonal'"):
        SignedRandomFeatureKernel(8, SPECTRUM, num_dims=3, sampler="qmc")
    with pytest.raises(TypeError, match="SignedRadialSpectrum"):
        SignedRandomFeatureKernel(8, "delta", num_dims=3)
