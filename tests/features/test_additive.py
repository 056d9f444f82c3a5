"""gprf.features.additive: per-dimension and per-pair random Fourier features are unbiased for the first- and
second-order additive kernels, with the closed-form variance of independent components; construction errors."""

from __future__ import annotations

import pytest
import torch

from gprf.features import AdditiveFourierFeatures, RandomFourierFeatures

NUM_DRAWS = 400
Z_BOUND = 4.5  # two-sided, over a few dozen z-scores per test


def _inputs(n: int = 6, d: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = 0.7 * torch.randn(2 * n, d, generator=generator, dtype=torch.float64)
    return x[:n], x[n:]


def _estimates(feature_map: AdditiveFourierFeatures, x1, x2, draws: int) -> torch.Tensor:
    values = []
    for draw in range(draws):
        feature_map.resample(torch.Generator().manual_seed(draw))
        values.append((feature_map(x1) * feature_map(x2)).sum(-1))
    return torch.stack(values)


@pytest.mark.parametrize("kernel", ["rbf", "matern32"])
@pytest.mark.parametrize("order", [1, 2])
def test_mean_and_variance_match_the_closed_forms(kernel, order, float64):
    pair_features = {"features_per_pair": 4} if order == 2 else {}
    feature_map = AdditiveFourierFeatures(4, 6, kernel=kernel, order=order, seed=0, **pair_features)
    x1, x2 = _inputs()
    values = _estimates(feature_map, x1, x2, NUM_DRAWS)
    variance = feature_map.variance(x1, x2)
    z_mean = (values.mean(0) - feature_map.expected_kernel(x1, x2)) / (variance / NUM_DRAWS).sqrt()
    assert z_mean.abs().max() < Z_BOUND
    # The variance of the sample variance is about 2 var^2 / (S - 1) for near-Gaussian sums of many components.
    z_variance = (values.var(0) - variance) / (variance * (2 / (NUM_DRAWS - 1)) ** 0.5)
    assert z_variance.abs().max() < 2 * Z_BOUND  # heavier tails than Gaussian: a wider bound


def test_first_order_components_are_one_dimensional_fourier_features(float64):
    feature_map = AdditiveFourierFeatures(3, 8, kernel="matern52", seed=0)
    x1, x2 = _inputs(d=3)
    root = feature_map(x1)
    assert root.shape == (6, 24) and feature_map.num_features == 24
    one_dim = RandomFourierFeatures(1, 8, kernel="matern52", seed=0)
    one_dim.frequencies.copy_(feature_map.frequencies[1].unsqueeze(0))
    torch.testing.assert_close(root[:, 8:16], one_dim(x1[:, 1:2]))
    first, second = feature_map.component_kernels(x1, x2)
    expected = sum(one_dim.expected_kernel(x1[:, j : j + 1], x2[:, j : j + 1]) for j in range(3))
    torch.testing.assert_close(first, expected)
    assert not second.any()


def test_second_order_layout_and_newton_identity(float64):
    feature_map = AdditiveFourierFeatures(4, 4, order=2, features_per_pair=6, seed=0)
    first_cols, second_cols = feature_map.component_slices()
    assert (first_cols, second_cols) == (slice(0, 16), slice(16, 16 + 6 * 6))
    assert feature_map.pair_index.tolist() == [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]
    x1, x2 = _inputs()
    per_dim = torch.exp(-0.5 * (x1 - x2).square())
    pairs = sum(per_dim[:, i] * per_dim[:, j] for i in range(4) for j in range(i + 1, 4))
    torch.testing.assert_close(feature_map.component_kernels(x1, x2)[1], pairs)


def test_batches_draw_independently_and_float32_works():
    feature_map = AdditiveFourierFeatures(3, 4, order=2, batch_shape=(2,), seed=0)
    x1, _ = _inputs(d=3)
    root = feature_map(x1.float())
    assert root.shape == (2, 6, feature_map.num_features) and root.dtype == torch.float32
    assert not torch.allclose(root[0], root[1])


def test_bad_input_errors():
    with pytest.raises(ValueError, match="features_per_dim must be even"):
        AdditiveFourierFeatures(3, 5)
    with pytest.raises(ValueError, match="features_per_pair must be even"):
        AdditiveFourierFeatures(3, 4, order=2, features_per_pair=3)
    with pytest.raises(ValueError, match="features_per_pair=4 sizes the pairwise interactions.*drop features_per_pair"):
        AdditiveFourierFeatures(3, 8, features_per_pair=4)
    with pytest.raises(ValueError, match="order must be 1 or 2"):
        AdditiveFourierFeatures(3, 4, order=3)
    with pytest.raises(ValueError, match="'rbf'"):
        AdditiveFourierFeatures(3, 4, kernel="periodic")
    with pytest.raises(NotImplementedError, match="cannot be resized"):
        AdditiveFourierFeatures(3, 4).resized(8)
