"""GPyTorch's ``BaseKernelTestCase`` on the public gprf kernels the per-module tests do not already run it on.

Together with ``tests/kernels`` every public kernel class of :mod:`gprf.kernels` runs the peer contract, except the
ones :data:`NOT_APPLICABLE` names (abstract bases, mixins, and a task kernel whose inputs are integer task indices);
:func:`test_every_public_kernel_class_runs_the_peer_contract` keeps that list complete.
"""

from __future__ import annotations

import inspect
import re
import unittest
from pathlib import Path

import torch
from gpytorch.kernels import Kernel, ScaleKernel

import gprf.kernels
from gprf.kernels import (
    DeltaGaussianKernel,
    ExponentialDotProductKernel,
    FeatureSumKernel,
    MaclaurinKernel,
    RandomFourierKernel,
    SignedPartKernel,
    SignedRandomFeatureKernel,
    SphericalPolynomialKernel,
)
from gprf.testing import SEED, FeatureKernelTestCase, InputDimKernelTestCase, num_dims_of
from tests.helpers.regression import SPECTRUM

TESTS = Path(__file__).resolve().parent.parent
#: Public kernel classes that cannot run ``BaseKernelTestCase``, and why.
NOT_APPLICABLE = {
    "FeatureKernel": "abstract base of the feature kernels (no features of its own)",
    "FeatureMapOwner": "mixin that owns a feature map; runs through every family kernel built on it",
    "RandomFeatureKernel": "abstract base of the family kernels (each family's kernel runs it)",
    "SignedFeatureKernel": "abstract base of the signed kernels (SignedRandomFeatureKernel runs it)",
    "DotProductKernel": "abstract base of the dot-product kernels (no profile of its own)",
    "IndexRootKernel": "a task kernel: its inputs are integer task indices, not the test case's real points",
}


class TestFeatureSumKernel(FeatureKernelTestCase, unittest.TestCase):
    """A sum of a scaled random Fourier kernel and a Maclaurin kernel (different families, concatenated roots)."""

    def create_kernel_no_ard(self, **kwargs):
        num_dims = num_dims_of(kwargs, 2)
        active_dims = kwargs.pop("active_dims", None)
        parts = (
            ScaleKernel(
                RandomFourierKernel(32, num_dims=num_dims, seed=SEED, active_dims=active_dims, **kwargs), **kwargs
            ),
            MaclaurinKernel(16, num_dims=num_dims, seed=SEED + 1, active_dims=active_dims, **kwargs),
        )
        return FeatureSumKernel(*parts, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        parts = (
            RandomFourierKernel(32, num_dims=num_dims, ard_num_dims=num_dims, seed=SEED, **kwargs),
            MaclaurinKernel(16, num_dims=num_dims, ard_num_dims=num_dims, seed=SEED + 1, **kwargs),
        )
        return FeatureSumKernel(*parts, **kwargs)


class TestSignedPartKernelPositive(FeatureKernelTestCase, unittest.TestCase):
    """The PSD part :math:`AA^\\top` of a signed kernel."""

    part = "positive"

    def create_kernel_no_ard(self, **kwargs):
        signed = SignedRandomFeatureKernel(32, SPECTRUM, num_dims=num_dims_of(kwargs, 2), seed=SEED, **kwargs)
        return SignedPartKernel(signed, part=self.part)

    def create_kernel_ard(self, num_dims, **kwargs):
        signed = SignedRandomFeatureKernel(32, SPECTRUM, num_dims=num_dims, ard_num_dims=num_dims, seed=SEED, **kwargs)
        return SignedPartKernel(signed, part=self.part)


class TestSignedPartKernelAbsolute(TestSignedPartKernelPositive):
    """The PSD part :math:`AA^\\top + BB^\\top` of a signed kernel."""

    part = "absolute"


class TestExponentialDotProductKernel(InputDimKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        kwargs.pop("num_dims", None)  # exact kernels take any width
        return ExponentialDotProductKernel(**kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return ExponentialDotProductKernel(ard_num_dims=num_dims, **kwargs)

    def create_data_no_batch(self):
        # exp(x'y) of unit-variance points in 10 dimensions spans e^{+-30}: scaled down, float32 keeps 1e-5.
        return super().create_data_no_batch() / 4


class TestDeltaGaussianKernel(InputDimKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        kwargs.pop("num_dims", None)
        return DeltaGaussianKernel([2.0, -1.0], [1.0, 3.0], **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return DeltaGaussianKernel([2.0, -1.0], [1.0, 3.0], ard_num_dims=num_dims, **kwargs)


class TestSphericalPolynomialKernel(InputDimKernelTestCase, unittest.TestCase):
    """A kernel of the unit sphere: the test case's points are normalised over the columns the kernel sees."""

    unit_columns: list[int] | None = None

    def _on_the_sphere(self, x):
        columns = list(range(x.size(-1))) if self.unit_columns is None else self.unit_columns
        x = x.clone()
        x[..., columns] = x[..., columns] / x[..., columns].norm(dim=-1, keepdim=True)
        return x

    def create_data_no_batch(self):
        return self._on_the_sphere(super().create_data_no_batch())

    def create_data_single_batch(self):
        return self._on_the_sphere(super().create_data_single_batch())

    def create_data_double_batch(self):
        return self._on_the_sphere(super().create_data_double_batch())

    def _check_active_dims(self, active_dims):
        self.unit_columns = active_dims
        try:
            super()._check_active_dims(active_dims)
        finally:
            self.unit_columns = None

    def test_kernel_dtype_device(self):
        """GPyTorch reads a kernel's dtype and device from its parameters; this kernel has none (``a`` and the
        degree are fixed numbers), so it reports the default dtype and no device, whatever ``.to()`` (documented
        in the pitfalls). Its values take the inputs' dtype."""
        kernel = self.create_kernel_no_ard().to(torch.float32)
        self.assertEqual(kernel.dtype, torch.get_default_dtype())
        self.assertIsNone(kernel.device)
        for dtype in (torch.float32, torch.float64):
            x = self._on_the_sphere(torch.randn(5, 3, dtype=dtype))
            self.assertEqual(kernel(x).to_dense().dtype, dtype)

    def create_kernel_no_ard(self, **kwargs):
        kwargs.pop("num_dims", None)
        return SphericalPolynomialKernel(2.0, 3, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return SphericalPolynomialKernel(2.0, 3, ard_num_dims=num_dims, **kwargs)


def _public_kernel_classes() -> set[str]:
    return {
        name
        for name in gprf.kernels.__all__
        if inspect.isclass(getattr(gprf.kernels, name))
        and issubclass(getattr(gprf.kernels, name), Kernel)
        or name == "FeatureMapOwner"
    }


def _kernels_running_the_peer_contract() -> set[str]:
    """Kernel class names constructed in ``create_kernel_*`` of a ``...KernelTestCase`` subclass anywhere in tests/."""
    names = set()
    for path in TESTS.rglob("test_*.py"):
        text = path.read_text()
        if "KernelTestCase" not in text:
            continue
        for body in re.findall(r"def create_kernel_(?:no_)?ard\(.*?\n((?:\s{8}.*\n|\n)+)", text):
            names.update(re.findall(r"\b([A-Z]\w*Kernel)\(", body))
    return names


def test_every_public_kernel_class_runs_the_peer_contract():
    public = _public_kernel_classes()
    missing = public - _kernels_running_the_peer_contract() - set(NOT_APPLICABLE)
    assert not missing, f"public kernels without GPyTorch's BaseKernelTestCase: {sorted(missing)}"
    assert set(NOT_APPLICABLE) <= public, "NOT_APPLICABLE names a class that is no longer public"
