"""``ScaleStatistics``: the O(F) marginal likelihood and the profiled constant against dense Gaussian densities."""

from __future__ import annotations

import math

import pytest
import torch

from gprf.fitting import FeatureSums, ScaleStatistics


def _problem(num_data: int, num_features: int, batch_shape=(), seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(*batch_shape, num_data, num_features, generator=generator, dtype=torch.float64)
    features = features / math.sqrt(num_features)
    residual = 2.0 + torch.randn(*batch_shape, num_data, generator=generator, dtype=torch.float64)
    return features, residual


def _float64(value: float) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float64)


def _chunks(features: torch.Tensor, residual: torch.Tensor, rows: int):
    return [
        (features[..., start : start + rows, :], residual[..., start : start + rows])
        for start in range(0, features.size(-2), rows)
    ]


def _dense_log_density(features, residual, outputscale, noise, constant):
    """log N(residual | constant, s ΦΦᵀ + σ² I) / N from the dense N x N covariance."""
    outputscale, noise, constant = (torch.as_tensor(v, dtype=torch.float64) for v in (outputscale, noise, constant))
    eye = torch.eye(features.size(-2), dtype=torch.float64)
    covariance = outputscale[..., None, None] * features @ features.mT + noise[..., None, None] * eye
    mean = constant[..., None].expand(residual.shape)
    density = torch.distributions.MultivariateNormal(mean, covariance).log_prob(residual)
    return density / features.size(-2)


@pytest.mark.parametrize(("num_data", "num_features"), [(60, 12), (9, 20)], ids=["N>F", "N<F"])
def test_log_marginal_likelihood_equals_the_dense_gaussian_density(num_data, num_features):
    features, residual = _problem(num_data, num_features)
    statistics = ScaleStatistics.from_chunks(_chunks(features, residual, rows=7))
    assert statistics.num_data == num_data and statistics.num_features == num_features
    for outputscale, noise, constant in [(1.0, 0.1, 0.0), (3.7, 0.02, 1.9), (0.2, 2.5, -0.4)]:
        value = statistics.log_marginal_likelihood(_float64(outputscale), _float64(noise), constant)
        expected = _dense_log_density(features, residual, outputscale, noise, constant)
        torch.testing.assert_close(value, expected, rtol=1e-11, atol=0)


def test_batched_statistics_equal_each_member():
    features, residual = _problem(30, 8, batch_shape=(3,))
    statistics = ScaleStatistics.from_chunks(_chunks(features, residual, rows=11))
    assert statistics.batch_shape == torch.Size([3])
    outputscale = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    noise = torch.tensor([0.3, 0.05, 1.0], dtype=torch.float64)
    constant = torch.tensor([0.1, 2.0, -1.0], dtype=torch.float64)
    value = statistics.log_marginal_likelihood(outputscale, noise, constant)
    expected = _dense_log_density(features, residual, outputscale, noise, constant)
    torch.testing.assert_close(value, expected, rtol=1e-11, atol=0)


def test_shared_features_broadcast_over_batched_residuals():
    """One feature matrix, two target vectors (a kernel without batch dimensions in a two-output model)."""
    features, _ = _problem(25, 6)
    _, residual = _problem(25, 6, batch_shape=(2,), seed=1)
    statistics = ScaleStatistics.from_chunks(_chunks(features, residual, rows=10))
    assert statistics.eigenvalues.shape == (6,) and statistics.batch_shape == torch.Size([2])
    value = statistics.log_marginal_likelihood(_float64(1.3), _float64(0.2), 0.5)
    torch.testing.assert_close(value, _dense_log_density(features, residual, 1.3, 0.2, 0.5), rtol=1e-11, atol=0)


def test_optimal_constant_is_the_generalised_least_squares_mean_and_a_stationary_point():
    features, residual = _problem(40, 10)
    statistics = ScaleStatistics.from_chunks(_chunks(features, residual, rows=40))
    outputscale, noise = torch.tensor(2.0, dtype=torch.float64), torch.tensor(0.3, dtype=torch.float64)
    constant = statistics.optimal_constant(outputscale, noise)
    covariance = outputscale * features @ features.T + noise * torch.eye(40, dtype=torch.float64)
    ones = torch.ones(40, dtype=torch.float64)
    expected = ones @ torch.linalg.solve(covariance, residual) / (ones @ torch.linalg.solve(covariance, ones))
    torch.testing.assert_close(constant, expected, rtol=1e-12, atol=0)
    variable = constant.clone().requires_grad_(True)
    (gradient,) = torch.autograd.grad(statistics.log_marginal_likelihood(outputscale, noise, variable), variable)
    assert abs(float(gradient)) < 1e-13
    # The likelihood is concave in c: moving away from c* lowers it.
    best = statistics.log_marginal_likelihood(outputscale, noise, constant)
    for shift in (-0.1, 0.1):
        assert statistics.log_marginal_likelihood(outputscale, noise, constant + shift) < best


def test_chunking_does_not_change_the_statistics():
    features, residual = _problem(50, 9)
    whole = ScaleStatistics.from_chunks([(features, residual)])
    chunked = ScaleStatistics.from_chunks(_chunks(features, residual, rows=3))
    for name in ("eigenvalues", "residual_square", "residual_sum"):
        torch.testing.assert_close(getattr(chunked, name), getattr(whole, name), rtol=1e-12, atol=1e-13)
    # Eigenvectors are defined up to sign: compare the sign-free products a_i^2, a_i b_i.
    for first, second in [("residual_projection", "residual_projection"), ("residual_projection", "ones_projection")]:
        torch.testing.assert_close(
            getattr(chunked, first) * getattr(chunked, second),
            getattr(whole, first) * getattr(whole, second),
            rtol=1e-10,
            atol=1e-12,
        )


def test_float32_features_are_summed_in_float64():
    features, residual = _problem(40, 10)
    statistics = ScaleStatistics.from_chunks([(features.float(), residual.float())])
    assert statistics.eigenvalues.dtype == torch.float64
    expected = _dense_log_density(features.float().double(), residual.float().double(), 1.0, 0.1, 0.0)
    torch.testing.assert_close(
        statistics.log_marginal_likelihood(_float64(1.0), _float64(0.1)), expected, rtol=1e-11, atol=0
    )


def test_bad_chunks_raise_clear_errors():
    features, residual = _problem(10, 4)
    with pytest.raises(ValueError, match="no rows"):
        ScaleStatistics.from_chunks([])
    with pytest.raises(ValueError, match="F must not change"):
        ScaleStatistics.from_chunks([(features, residual), (features[:, :3], residual)])
    with pytest.raises(ValueError, match="rows as its features"):
        ScaleStatistics.from_chunks([(features, residual[:5])])
    with pytest.raises(TypeError, match="real floating-point"):
        ScaleStatistics.from_chunks([(features.long(), residual)])
    bad = residual.clone()
    bad[3] = math.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        ScaleStatistics.from_chunks([(features, bad)])


def test_reduce_sees_the_sums_of_the_chunks_and_its_result_is_used():
    """The hook of rows sharded over processes: here it adds the sums of the other half of the rows."""
    features, residual = _problem(40, 6)
    other = ScaleStatistics.from_chunks([(features[20:], residual[20:])])
    seen = {}

    def add_other_half(sums, num_data):
        seen["num_data"] = num_data
        phi, r = features[20:], residual[20:]
        rhs = torch.stack([r, torch.ones_like(r)], -1)
        others = [phi.mT @ phi, phi.mT @ rhs, r.square().sum(), r.sum()]
        return [mine + theirs for mine, theirs in zip(sums, others, strict=True)], num_data + 20

    reduced = ScaleStatistics.from_chunks(_chunks(features[:20], residual[:20], rows=7), reduce=add_other_half)
    whole = ScaleStatistics.from_chunks([(features, residual)])
    assert seen["num_data"] == 20 and reduced.num_data == 40 and other.num_data == 20
    reduced_sums = FeatureSums.from_chunks([(features[:20], residual[:20])], reduce=add_other_half)
    torch.testing.assert_close(reduced_sums.gram, features.mT @ features, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(reduced.eigenvalues, whole.eigenvalues, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(reduced.residual_square, whole.residual_square, rtol=1e-12, atol=0)
    torch.testing.assert_close(
        reduced.log_marginal_likelihood(_float64(1.3), _float64(0.2), 0.4),
        whole.log_marginal_likelihood(_float64(1.3), _float64(0.2), 0.4),
        rtol=1e-12,
        atol=0,
    )


def test_feature_sums_are_shared_by_the_statistics():
    features = torch.randn(20, 6, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    residual = torch.randn(20, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    sums = FeatureSums.from_chunks([(features, residual)])
    torch.testing.assert_close(sums.gram, features.mT @ features)
    torch.testing.assert_close(sums.projections[:, 0], features.mT @ residual)
    torch.testing.assert_close(sums.projections[:, 1], features.sum(0))
    direct = ScaleStatistics.from_chunks([(features, residual)])
    torch.testing.assert_close(ScaleStatistics.from_sums(sums).eigenvalues, direct.eigenvalues)


@pytest.mark.parametrize(("num_data", "num_features"), [(9, 20), (30, 8)], ids=["N<F", "N>F"])
@pytest.mark.parametrize("method", ["eigh", "tridiagonal"])
def test_statistics_from_the_points_gram_give_the_same_likelihood(num_data, num_features, method):
    """Φ Φᵀ has the nonzero eigenvalues of Φᵀ Φ, and a, b follow from its eigenvectors: the same density."""
    features, residual = _problem(num_data, num_features, batch_shape=(2,))
    statistics = ScaleStatistics.from_points(features, residual, method=method)
    assert statistics.eigenvalues.shape == (2, num_data) and statistics.num_data == num_data
    from_sums = ScaleStatistics.from_chunks(_chunks(features, residual, rows=4))
    outputscale = torch.tensor([0.7, 2.0], dtype=torch.float64)
    noise = torch.tensor([0.05, 0.4], dtype=torch.float64)
    for constant in (0.0, 1.5):
        value = statistics.log_marginal_likelihood(outputscale, noise, constant)
        expected = _dense_log_density(features, residual, outputscale, noise, torch.full((2,), constant))
        torch.testing.assert_close(value, expected, rtol=1e-11, atol=0)
        reference = from_sums.log_marginal_likelihood(outputscale, noise, constant)
        torch.testing.assert_close(value, reference, rtol=1e-11, atol=0)
    constants = [source.optimal_constant(outputscale, noise) for source in (statistics, from_sums)]
    torch.testing.assert_close(*constants, rtol=1e-10, atol=0)


def test_statistics_from_the_points_gram_refuse_bad_input():
    features, residual = _problem(6, 10)
    with pytest.raises(ValueError, match="residual"):
        ScaleStatistics.from_points(features, residual[:-1])
    with pytest.raises(ValueError, match="NaN or infinite"):
        ScaleStatistics.from_points(features, residual.index_fill(0, torch.tensor([2]), math.nan))
    with pytest.raises(TypeError, match="floating-point"):
        ScaleStatistics.from_points(features.long(), residual)


def test_statistics_from_the_points_gram_on_the_features_device(device):
    """float32 features on the device: the statistics stay there, in float64, and give the CPU's likelihood."""
    features, residual = _problem(9, 20, batch_shape=(2,))
    on_device = ScaleStatistics.from_points(features.float().to(device), residual.float().to(device))
    on_cpu = ScaleStatistics.from_points(features.float(), residual.float())
    assert on_device.eigenvalues.device.type == device.type and on_device.eigenvalues.dtype == torch.float64
    outputscale = torch.tensor([0.7, 2.0], dtype=torch.float64)
    noise = torch.tensor([0.05, 0.4], dtype=torch.float64)
    value = on_device.log_marginal_likelihood(outputscale.to(device), noise.to(device), 1.5).cpu()
    torch.testing.assert_close(value, on_cpu.log_marginal_likelihood(outputscale, noise, 1.5), rtol=1e-10, atol=0)
    # The Gram is formed in float64 from the float32 values: the float64 density of those same values.
    expected = _dense_log_density(features.float().double(), residual.float().double(), outputscale, noise, 1.5)
    torch.testing.assert_close(value, expected, rtol=1e-10, atol=0)
