"""gprf.linalg.feature_root: the FeatureRoot hand-off K = s RR^T (+ noise) — its sizes, the amplitude kept apart
from the root, the scaled root, and factor(), which needs the noise and gives the dense weight posterior."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from gprf.linalg import FeatureRoot
from gprf.linalg.feature_root import _part


def _root(batch=(), n=12, f=5, seed=0) -> FeatureRoot:
    generator = torch.Generator().manual_seed(seed)
    features = torch.randn(*batch, n, f, generator=generator, dtype=torch.float64)
    outputscale = 0.5 + torch.rand(batch, generator=generator, dtype=torch.float64)
    noise = 0.1 + torch.rand(*batch, n, generator=generator, dtype=torch.float64)
    return FeatureRoot(features, outputscale, noise)


def test_sizes_amplitude_and_scaled_features():
    root = _root(batch=(2,))
    assert (root.num_points, root.num_columns) == (12, 5)
    amplitude = root.amplitude()
    assert amplitude.shape == (2, 1, 1) and root.amplitude(0).shape == (2,) and root.amplitude(1).shape == (2, 1)
    torch.testing.assert_close(amplitude.square().flatten(), root.outputscale)
    scaled = root.scaled_features()
    torch.testing.assert_close(scaled @ scaled.mT, root.outputscale.view(2, 1, 1) * (root.features @ root.features.mT))
    # Without an amplitude the root is its own scaled root (no copy).
    plain = FeatureRoot(root.features)
    assert plain.amplitude() is None and plain.scaled_features() is root.features
    # One amplitude for an unbatched root (a 0-d outputscale).
    single = FeatureRoot(root.features[0], torch.tensor(4.0, dtype=torch.float64))
    assert single.amplitude(0).item() == 2.0 and single.amplitude().shape == (1, 1)


def test_scale_rows_casts_the_amplitude_to_the_values():
    root = _root(batch=(2,))
    values = torch.randn(2, 3, dtype=torch.complex64)
    scaled = root.scale_rows(values, 1)
    assert scaled.dtype == torch.complex64
    expected = values.to(torch.complex128) * root.outputscale.sqrt().unsqueeze(-1)
    torch.testing.assert_close(scaled, expected.to(torch.complex64))


def _full_root(batch=(2, 3), n=6, f=4, d=3) -> FeatureRoot:
    generator = torch.Generator().manual_seed(3)
    return FeatureRoot(
        torch.randn(*batch, n, f, generator=generator, dtype=torch.float64),
        outputscale=torch.rand(batch, generator=generator, dtype=torch.float64),
        noise=torch.rand(*batch, n, generator=generator, dtype=torch.float64),
        inputs=torch.randn(*batch, n, d, generator=generator, dtype=torch.float64),
        versions=(7,),
    )


def test_map_tensors_reaches_every_part_with_its_batch_dims():
    root = _full_root()
    moved = root.map_tensors(lambda t, tail: t.permute(1, 0, *range(2, 2 + tail)))
    assert moved.versions == (7,)
    torch.testing.assert_close(moved.features, root.features.transpose(0, 1))
    torch.testing.assert_close(moved.outputscale, root.outputscale.T)
    torch.testing.assert_close(moved.noise, root.noise.transpose(0, 1))
    torch.testing.assert_close(moved.inputs, root.inputs.transpose(0, 1))


def test_rows_select_every_per_row_part():
    root = _full_root()
    rows = root.rows(slice(1, 4), (1, slice(None)))
    torch.testing.assert_close(rows.features, root.features[1, :, 1:4])
    torch.testing.assert_close(rows.outputscale, root.outputscale[1])
    torch.testing.assert_close(rows.noise, root.noise[1, :, 1:4])
    torch.testing.assert_close(rows.inputs, root.inputs[1, :, 1:4])
    # One noise variance per batch member is shared by whatever rows are taken.
    shared = root.with_noise(root.noise[..., :1]).rows(slice(2, 5), (slice(None), 0))
    torch.testing.assert_close(shared.noise, root.noise[:, 0, :1])


def test_a_new_part_is_declared_once():
    """A part added to the record (here by a subclass) follows batch reshaping and row selection unchanged."""

    @dataclasses.dataclass(frozen=True)
    class WithWeights(FeatureRoot):
        weights: torch.Tensor | None = _part(1, default=None)

    base = _full_root()
    root = WithWeights(base.source, base.outputscale, inputs=base.inputs, weights=torch.arange(36.0).view(2, 3, 6))
    torch.testing.assert_close(root.rows(slice(0, 2), (0, 2)).weights, root.weights[0, 2, :2])
    torch.testing.assert_close(root.map_tensors(lambda t, tail: t.unsqueeze(0)).weights, root.weights.unsqueeze(0))


def test_with_noise_returns_a_new_frozen_hand_off():
    root = FeatureRoot(torch.ones(3, 2, dtype=torch.float64), versions=(4,))
    noisy = root.with_noise(torch.full((1,), 0.2, dtype=torch.float64))
    assert root.noise is None and noisy.noise.item() == 0.2
    assert noisy.features is root.features and noisy.versions == (4,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        root.noise = noisy.noise


def test_factor_needs_the_noise():
    root = _root()
    with pytest.raises(ValueError, match="needs its noise variances"):
        FeatureRoot(root.features, root.outputscale).factor()


@pytest.mark.parametrize("batch", [(), (3,)])
def test_factor_gives_the_dense_weight_posterior(batch):
    """C = I + s R^T S^-1 R and sqrt(s) R^T S^-1 y: the weight posterior N(C^-1 sqrt(s) R^T S^-1 y, C^-1)."""
    root = _root(batch)
    y = torch.randn(*batch, 12, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    factor, projection = root.factor(y)
    s = root.outputscale.view(*batch, 1, 1)
    inverse_noise = 1 / root.noise.unsqueeze(-1)
    capacitance = torch.eye(5, dtype=torch.float64) + s * root.features.mT @ (inverse_noise * root.features)
    expected_projection = s.sqrt() * root.features.mT @ (inverse_noise * y)
    torch.testing.assert_close(projection, expected_projection)
    torch.testing.assert_close(factor.solve(projection), torch.linalg.solve(capacitance, expected_projection))
    torch.testing.assert_close(factor.logdet(), torch.logdet(capacitance))
    # The dense posterior mean of f = sqrt(s) R w at the training points, s RR^T (s RR^T + S)^-1 y, is the same.
    scaled = s.sqrt() * root.features
    dense_mean = scaled @ scaled.mT @ torch.linalg.solve(scaled @ scaled.mT + torch.diag_embed(root.noise), y)
    torch.testing.assert_close(scaled @ factor.solve(projection), dense_mean)


def test_factor_of_other_features_of_the_same_rows():
    """The complex features behind a real root: C = I + s Phi^H S^-1 Phi."""
    root = _root()
    generator = torch.Generator().manual_seed(2)
    phi = torch.complex(
        torch.randn(12, 4, generator=generator, dtype=torch.float64),
        torch.randn(12, 4, generator=generator, dtype=torch.float64),
    )
    factor, _ = root.factor(features=phi)
    s = root.outputscale
    capacitance = torch.eye(4, dtype=torch.complex128) + s * phi.mH @ (phi / root.noise.unsqueeze(-1))
    torch.testing.assert_close(factor.logdet(), torch.logdet(capacitance).real)


@pytest.mark.parametrize("batch", [(), (3,)])
def test_sums_are_what_factor_factors(batch):
    """G = s R^T S^-1 R and sqrt(s) R^T S^-1 y, not factored (sums over rows held by several processes)."""
    root = _root(batch)
    y = torch.randn(*batch, 12, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    gram, projection = root.sums(y)
    factor, expected_projection = root.factor(y)
    cholesky = factor.cholesky
    torch.testing.assert_close(gram + torch.eye(5, dtype=torch.float64), cholesky @ cholesky.mT)
    torch.testing.assert_close(projection, expected_projection, rtol=0, atol=0)
    # Differentiable in the root, its amplitude and its noise, as the marginal likelihood needs.
    features = root.features.clone().requires_grad_(True)
    FeatureRoot(features, root.outputscale, root.noise).sums(y)[0].sum().backward()
    torch.testing.assert_close(
        features.grad,
        2
        * root.outputscale.view(*batch, 1, 1)
        * features.detach().sum(-1, keepdim=True).expand_as(features)
        / root.noise.unsqueeze(-1),
    )
