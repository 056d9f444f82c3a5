"""QuadratureKernel and ArcCosineQuadratureKernel (SR(3,3) features) and the exact ArcCosineKernel."""

from __future__ import annotations

import math
import unittest

import gpytorch
import pytest
import torch
from gpytorch.kernels import RBFKernel, ScaleKernel
from linear_operator.operators import LowRankRootLinearOperator

from gprf.kernels import ArcCosineKernel, ArcCosineQuadratureKernel, QuadratureKernel
from tests.kernels.test_random_fourier import SEED, RandomFeatureKernelTestCase, _num_dims
from tests.prediction.conftest import ExactModel, make_data, train_and_predict

pytestmark = pytest.mark.usefixtures("single_thread")


def _quadrature_kernel(name: str, num_rules: int, **kwargs):
    """The SR(3,3) kernel of ``name``: ``"rbf"``, ``"arccos0"`` or ``"arccos1"``."""
    if name == "rbf":
        return QuadratureKernel(num_rules, **kwargs)
    return ArcCosineQuadratureKernel(num_rules, order=int(name[-1]), **kwargs)


@pytest.mark.filterwarnings("ignore:QuadratureFeatures.*infinite variance:UserWarning")
class TestQuadratureKernelRBF(RandomFeatureKernelTestCase, unittest.TestCase):
    rotation = "haar"

    def create_kernel_no_ard(self, **kwargs):
        return QuadratureKernel(2, _num_dims(kwargs, 2), rotation=self.rotation, seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return QuadratureKernel(2, num_dims, rotation=self.rotation, ard_num_dims=num_dims, seed=SEED, **kwargs)


class TestQuadratureKernelButterfly(TestQuadratureKernelRBF):
    rotation = "butterfly"


class TestQuadratureKernelArcCosine(RandomFeatureKernelTestCase, unittest.TestCase):
    """Scale-free kernels: no ARD lengthscale, so the ARD variants build the kernel without one."""

    def create_kernel_no_ard(self, **kwargs):
        return ArcCosineQuadratureKernel(2, _num_dims(kwargs, 2), order=1, rotation="butterfly", seed=SEED, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return ArcCosineQuadratureKernel(2, num_dims, order=1, rotation="butterfly", seed=SEED, **kwargs)


class TestArcCosineKernel(RandomFeatureKernelTestCase, unittest.TestCase):
    def create_kernel_no_ard(self, **kwargs):
        kwargs.pop("num_dims", None)
        return ArcCosineKernel(order=1, **kwargs)

    def create_kernel_ard(self, num_dims, **kwargs):
        return ArcCosineKernel(order=0, **kwargs)

    def test_kernel_dtype_device(self):
        # Without parameters or buffers GPyTorch reports device None: nothing to move.
        kernel = ArcCosineKernel(order=1)
        assert kernel.device is None and kernel.dtype == torch.get_default_dtype()


@pytest.fixture
def x64():
    return torch.randn(30, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


@pytest.mark.parametrize("kernel", ["rbf", "arccos0", "arccos1"])
def test_structure_and_exact(kernel, x64):
    k = _quadrature_kernel(kernel, 64, num_dims=4, seed=0).double()
    assert k.num_features == 2 * 64 * 5
    assert isinstance(k(x64).evaluate_kernel(), LowRankRootLinearOperator)
    exact = k.exact()
    if kernel == "rbf":
        assert isinstance(exact, RBFKernel) and exact.raw_lengthscale is k.raw_lengthscale
        k.lengthscale = 1.7
        torch.testing.assert_close(exact.lengthscale, k.lengthscale)
    else:
        assert isinstance(exact, ArcCosineKernel) and exact.order == int(kernel[-1])
        assert k.lengthscale is None and not k.has_lengthscale
    approx, target = k(x64).to_dense(), exact(x64).to_dense()
    assert (torch.linalg.norm(approx - target) / torch.linalg.norm(target)).item() < 0.15


def test_scale_free_lengthscale_errors():
    for name in ("ard_num_dims", "lengthscale_prior", "lengthscale_constraint"):
        value = 3 if name == "ard_num_dims" else gpytorch.constraints.Positive() if "constraint" in name else gpytorch.priors.GammaPrior(2.0, 1.0)
        with pytest.raises(ValueError, match="scale-free"):
            ArcCosineQuadratureKernel(1, num_dims=3, order=1, **{name: value})
        with pytest.raises(ValueError, match="scale-free"):
            ArcCosineKernel(order=0, **{name: value})
    kernel = ArcCosineQuadratureKernel(1, num_dims=3, order=0)
    with pytest.raises(ValueError, match="scale-free"):
        kernel.lengthscale = 2.0
    # A class attribute, as GPyTorch's kernels have it: no per-instance switch.
    assert not ArcCosineQuadratureKernel.has_lengthscale and "has_lengthscale" not in vars(kernel)
    assert QuadratureKernel.has_lengthscale and QuadratureKernel(1, num_dims=3).lengthscale.shape == (1, 1)


def test_bad_input():
    with pytest.raises(ValueError, match="num_rules"):
        QuadratureKernel(0, num_dims=3)
    with pytest.raises(TypeError, match="ArcCosineQuadratureKernel"):
        QuadratureKernel(1, num_dims=3, kernel="arccos1")
    with pytest.raises(ValueError, match="order must be 0 or 1"):
        ArcCosineQuadratureKernel(1, num_dims=3, order=2)
    with pytest.raises(ValueError, match="'haar', 'butterfly'"):
        QuadratureKernel(1, num_dims=3, rotation="householder")
    with pytest.raises(ValueError, match="num_dims"):
        QuadratureKernel(1)
    with pytest.raises(ValueError, match="order"):
        ArcCosineKernel(order=2)


def test_state_dict_into_fresh_kernel(x64):
    kernel = QuadratureKernel(3, num_dims=4, rotation="butterfly", ard_num_dims=4, seed=1).double()
    kernel.lengthscale = torch.tensor([[0.5, 1.0, 1.5, 2.0]], dtype=torch.float64)
    fresh = QuadratureKernel(3, num_dims=4, rotation="butterfly", ard_num_dims=4, seed=2).double()
    fresh.load_state_dict(kernel.state_dict())
    torch.testing.assert_close(fresh(x64).to_dense(), kernel(x64).to_dense())


@pytest.mark.parametrize("kernel", ["rbf", "arccos1"])
def test_exact_gp_training_loop(kernel):
    x, y = make_data(n=80, d=3, seed=0)
    test_x, test_y = make_data(n=40, d=3, seed=1)
    likelihood = gpytorch.likelihoods.GaussianLikelihood()
    covar = ScaleKernel(_quadrature_kernel(kernel, 8, num_dims=3, rotation="butterfly", seed=0))
    model = ExactModel(x, y, likelihood, covar).double()
    losses, prediction, nmse = train_and_predict(model, x, y, test_x, test_y)
    assert losses[-1] < losses[0] - 0.3
    # The RBF kernel fits the smooth target well; the (non-stationary, bias-free) arc-cosine-1 kernel only has to
    # beat the constant predictor.
    assert nmse.item() < (0.2 if kernel == "rbf" else 0.8), nmse
    assert bool((prediction.variance > 0).all())


def test_botorch_posterior():
    from botorch.models import SingleTaskGP

    x, y = make_data(n=30, d=3, seed=2)
    for kernel in ("rbf", "arccos1"):
        model = SingleTaskGP(
            x, y.unsqueeze(-1), covar_module=ScaleKernel(_quadrature_kernel(kernel, 4, num_dims=3, seed=0))
        )
        posterior = model.posterior(torch.rand(5, 3, dtype=torch.float64))
        assert posterior.mean.shape == (5, 1) and bool((posterior.variance > 0).all())
        assert math.isfinite(posterior.mean.sum().item())
