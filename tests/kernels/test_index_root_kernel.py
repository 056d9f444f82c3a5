"""IndexRootKernel: the exact task root of GPyTorch's IndexKernel and BoTorch's PositiveIndexKernel, tied parameters,
the ICM product with a data kernel, batches, serialisation, dtypes, devices and construction errors."""

from __future__ import annotations

import pickle

import pytest
import torch
from gpytorch.kernels import IndexKernel, RBFKernel

from gprf.kernels import FeatureProductKernel, IndexRootKernel, RandomFourierKernel
from gprf.linalg import FeatureRootLinearOperator

DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")),
]


def _index_kernel(num_tasks: int = 4, rank: int = 2, batch_shape=torch.Size(), seed: int = 0, **kwargs) -> IndexKernel:
    kernel = IndexKernel(num_tasks=num_tasks, rank=rank, batch_shape=batch_shape, **kwargs).double()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        kernel.covar_factor.copy_(torch.randn(kernel.covar_factor.shape, generator=generator, dtype=torch.float64))
        kernel.var = 0.1 + torch.rand(kernel.raw_var.shape, generator=generator, dtype=torch.float64)
    return kernel


def _tasks(n: int = 9, num_tasks: int = 4, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, num_tasks, (n, 1), generator=torch.Generator().manual_seed(seed)).double()


def test_root_is_exact_and_parameters_are_shared():
    index_kernel = _index_kernel()
    kernel, tasks = IndexRootKernel(index_kernel), _tasks()
    covariance = kernel(tasks).evaluate_kernel()
    assert isinstance(covariance, FeatureRootLinearOperator) and kernel.root_dim == 2 + 4
    torch.testing.assert_close(covariance.to_dense(), index_kernel(tasks).to_dense(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(kernel(tasks, tasks[:3]).to_dense(), index_kernel(tasks, tasks[:3]).to_dense())
    torch.testing.assert_close(kernel(tasks, diag=True), index_kernel(tasks, diag=True))
    assert kernel.exact() is index_kernel
    assert {id(p) for p in kernel.parameters()} == {id(p) for p in index_kernel.parameters()}
    kernel(tasks).to_dense().sum().backward()
    assert index_kernel.covar_factor.grad is not None and index_kernel.raw_var.grad is not None


def test_positive_index_kernel_root_is_normalised_to_the_target_task():
    positive_index = pytest.importorskip("botorch.models.kernels.positive_index")
    index_kernel = positive_index.PositiveIndexKernel(num_tasks=3, rank=2, target_task_index=1).double()
    kernel, tasks = IndexRootKernel(index_kernel), _tasks(num_tasks=3)
    torch.testing.assert_close(kernel(tasks).to_dense(), index_kernel(tasks).to_dense(), rtol=1e-12, atol=1e-12)
    root = kernel.task_root()
    torch.testing.assert_close(root[1].square().sum(), torch.tensor(1.0, dtype=torch.float64))
    index_kernel.unit_scale_for_target = False
    torch.testing.assert_close(kernel(tasks).to_dense(), index_kernel(tasks).to_dense(), rtol=1e-12, atol=1e-12)


def test_product_with_a_data_kernel_is_the_icm_kernel_root():
    data = RandomFourierKernel(32, num_dims=2, active_dims=[0, 1], seed=0).double()
    task = _index_kernel(active_dims=[2])
    product = data * task
    assert isinstance(product, FeatureProductKernel) and product.method == "kronecker"
    assert isinstance(product.kernels[1], IndexRootKernel) and product.root_dim == 32 * 6
    x = torch.cat([torch.rand(9, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64), _tasks()], -1)
    expected = data(x).to_dense() * task(x).to_dense()
    torch.testing.assert_close(product(x).to_dense(), expected, rtol=1e-12, atol=1e-12)
    exact = product.exact()(x).to_dense()
    rbf = RBFKernel().double()
    rbf.lengthscale = data.lengthscale
    torch.testing.assert_close(exact, rbf(x[:, :2]).to_dense() * task(x).to_dense())
    # The task factor is exact: the product's variance is the data kernel's times B_ij^2.
    z1, z2 = x[:, :2] / data.lengthscale, x.flip(0)[:, :2] / data.lengthscale
    b = task(x, x.flip(0), diag=True)
    expected_variance = data.feature_map.variance(z1, z2) * b.square()
    torch.testing.assert_close(product.variance(x, x.flip(0)).detach(), expected_variance.detach())


def test_batches_serialisation_and_indexing():
    index_kernel = _index_kernel(batch_shape=torch.Size([2]))
    kernel, tasks = IndexRootKernel(index_kernel), _tasks()
    covariance = kernel(tasks).to_dense()
    assert covariance.shape == (2, 9, 9)
    torch.testing.assert_close(covariance, index_kernel(tasks).to_dense())
    torch.testing.assert_close(kernel[1](tasks).to_dense(), covariance[1])
    plain = IndexRootKernel(_index_kernel())
    torch.testing.assert_close(
        plain.expand_batch(torch.Size([3]))(tasks).to_dense(), plain(tasks).to_dense().expand(3, 9, 9)
    )
    clone = pickle.loads(pickle.dumps(kernel))
    torch.testing.assert_close(clone(tasks).to_dense(), covariance)
    fresh = IndexRootKernel(_index_kernel(batch_shape=torch.Size([2]), seed=5))
    fresh.load_state_dict(kernel.state_dict())
    torch.testing.assert_close(fresh(tasks).to_dense(), covariance)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_devices_and_dtypes(device, dtype):
    kernel = IndexRootKernel(_index_kernel()).to(device=device, dtype=dtype)
    assert kernel.dtype == dtype and kernel.device.type == device
    tasks = _tasks().to(device=device, dtype=dtype)
    covariance = kernel(tasks).to_dense()
    assert covariance.dtype == dtype and covariance.device.type == device
    reference = IndexRootKernel(_index_kernel())(_tasks()).to_dense().detach()
    tolerance = 1e-5 * float(reference.abs().max()) if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(covariance.double().cpu(), reference, rtol=0, atol=tolerance)


def test_bad_input_errors():
    with pytest.raises(TypeError, match="IndexKernel or BoTorch PositiveIndexKernel, got RBFKernel"):
        IndexRootKernel(RBFKernel())
    with pytest.raises(ValueError, match="one column of task indices.*active_dims"):
        IndexRootKernel(_index_kernel())(torch.zeros(4, 2, dtype=torch.float64)).to_dense()
