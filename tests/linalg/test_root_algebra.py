"""gprf.linalg.root_algebra: the sum of two feature roots is their scaled concatenation, the product with an exact
root the row-wise Kronecker product, a task IndexKernel's covariance is read back as rows of an exact root, and a lazy
root stays lazy through both (same values and gradients as the formed roots)."""

from __future__ import annotations

import pytest
import torch
from gpytorch.kernels import IndexKernel, RBFKernel

from gprf.kernels import RandomFourierKernel
from gprf.linalg import FeatureRoot, LazyFeatures, weighted_gram_projection
from gprf.linalg.root_algebra import joined, kronecker_product, kronecker_rows, same_tensor, sum_roots, task_rows


def _roots(batch=(2,), n=7):
    generator = torch.Generator().manual_seed(0)
    first = FeatureRoot(
        torch.randn(*batch, n, 3, generator=generator, dtype=torch.float64),
        outputscale=0.5 + torch.rand(batch, generator=generator, dtype=torch.float64),
        versions=(1,),
    )
    second = FeatureRoot(torch.randn(n, 4, generator=generator, dtype=torch.float64), versions=(2,))
    return first, second


def _covariance(root: FeatureRoot) -> torch.Tensor:
    scaled = root.scaled_features()
    return scaled @ scaled.mT


def test_the_sum_is_the_scaled_concatenation():
    first, second = _roots()
    total = sum_roots(first, second)
    assert total.outputscale is None and total.num_columns == 7 and total.versions == (1, 2)
    torch.testing.assert_close(_covariance(total), _covariance(first) + _covariance(second), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="add the noise once"):
        sum_roots(first.with_noise(torch.ones(2, 1, dtype=torch.float64)), second)


def test_the_product_with_an_exact_root_is_the_kronecker_product():
    first, second = _roots()
    product = kronecker_product(first, second)
    assert product.num_columns == 12 and product.versions == (1, 2)
    torch.testing.assert_close(product.outputscale, first.outputscale)
    torch.testing.assert_close(_covariance(product), _covariance(first) * _covariance(second), rtol=1e-12, atol=1e-12)
    rows = kronecker_rows(first.features, second.features)
    torch.testing.assert_close(rows[..., 1, 4 + 3], first.features[..., 1, 1] * second.features[1, 3])


@pytest.mark.parametrize("batch", [(), (2,)])
def test_task_rows_are_an_exact_root_of_the_index_kernel(batch):
    kernel = IndexKernel(num_tasks=3, rank=1, batch_shape=torch.Size(batch)).double()
    with torch.no_grad():
        kernel.covar_factor.normal_(generator=torch.Generator().manual_seed(1))
    tasks = torch.tensor([[0.0], [2.0], [1.0], [2.0], [0.0]], dtype=torch.float64)
    covariance = kernel(tasks).evaluate_kernel()
    rows = task_rows(covariance)
    assert rows.shape == (*batch, 5, 3)
    torch.testing.assert_close(rows @ rows.mT, covariance.to_dense(), rtol=1e-12, atol=1e-12)
    # Cross covariances (other indices on each side) and other covariances are not task roots.
    assert task_rows(kernel(tasks, tasks.roll(1, 0)).evaluate_kernel()) is None
    assert task_rows(RBFKernel().double()(tasks).evaluate_kernel()) is None


def test_a_lazy_root_stays_lazy_with_the_same_values_and_gradients():
    kernel = RandomFourierKernel(6, num_dims=2, seed=0).double()
    x = torch.rand(9, 2, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    outputscale = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    other = torch.randn(9, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    noise = torch.full((1,), 0.2, dtype=torch.float64)
    rhs = torch.randn(9, 1, generator=torch.Generator().manual_seed(4), dtype=torch.float64)

    def combined(source):
        total = sum_roots(FeatureRoot(source, outputscale=outputscale), FeatureRoot(other)).source
        return total, kronecker_product(FeatureRoot(source), other).source

    lazy_total, lazy_product = combined(LazyFeatures(x, kernel.features, 4, [kernel.raw_lengthscale]))
    formed_total, formed_product = combined(kernel.features(x))
    assert isinstance(lazy_total, LazyFeatures) and isinstance(lazy_product, LazyFeatures)
    lazy_gram, lazy_projection = lazy_total.weighted_sums(noise, rhs, torch.float64, torch.float64)
    formed_gram, formed_projection = weighted_gram_projection(formed_total, noise, rhs)
    torch.testing.assert_close(lazy_gram, formed_gram, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lazy_projection, formed_projection, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(lazy_product.materialize(), formed_product, rtol=1e-12, atol=1e-12)
    parameters = [outputscale, kernel.raw_lengthscale]
    lazy_grads = torch.autograd.grad(lazy_gram.sum() + lazy_projection.sum(), parameters)
    formed_grads = torch.autograd.grad(formed_gram.sum() + formed_projection.sum(), parameters)
    for lazy_grad, formed_grad in zip(lazy_grads, formed_grads, strict=True):
        torch.testing.assert_close(lazy_grad, formed_grad, rtol=1e-10, atol=1e-12)


def test_joined_forms_the_combination_when_nothing_is_lazy():
    first, second = _roots(batch=())
    result = joined([first.features, second.features], lambda roots: torch.cat(roots, -1))
    torch.testing.assert_close(result, torch.cat([first.features, second.features], -1))


def test_same_tensor_recognises_views_without_comparing_and_compares_copies():
    x = torch.rand(4, 2, dtype=torch.float64)
    assert same_tensor(x, x) and same_tensor(x, x[:]) and same_tensor(x, x.clone())
    assert not same_tensor(x, x[:3]) and not same_tensor(x, x + 1)
