"""CompositionalFeatures: unbiasedness and variance vs the second-moment recursion, de-duplication, contract."""

from __future__ import annotations

import copy
import math
import pickle

import pytest
import torch

from gprf.features import CompositionalFeatures, DualActivation, Skeleton

pytestmark = pytest.mark.usefixtures("single_thread")

Z = 5.0
DRAWS = 300


def _pairs(dim: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = 2 * torch.randn(12, dim, generator=generator, dtype=torch.float64)
    y = 2 * torch.randn(12, dim, generator=generator, dtype=torch.float64)
    y[0] = x[0]
    return x, y


SKELETONS = {
    "one-layer exponential": lambda: Skeleton.fully_connected(5, 1, "exponential"),
    "two-layer exponential, gaussian pixels": lambda: Skeleton.convolutional(
        6, 3, 2, 1, DualActivation.exponential(0.8), base_kernel="gaussian"
    ),
    "two-layer relu": lambda: Skeleton.fully_connected(5, 2, "relu"),
}


@pytest.mark.parametrize("name", list(SKELETONS))
def test_unbiased_with_closed_form_variance(name, float64):
    skeleton = SKELETONS[name]()
    x, y = _pairs(skeleton.input_dim)
    features = CompositionalFeatures(skeleton, 64, deduplicate=False, batch_shape=(DRAWS,), seed=5)
    estimates = (features(x) * features(y)).sum(-1)  # (draws, pairs)
    target = features.expected_kernel(x, y)
    variance = features.variance(x, y)
    # ReLU nodes have a heavy-tailed degree law: the variance is finite only where the inputs' second moments
    # stay <= 1, i.e. off the diagonal here; test those pairs (the z-bound needs the variance).
    finite = torch.isfinite(variance)
    assert int(finite.sum()) >= 4, variance
    error = (estimates.mean(0) - target)[finite]
    assert bool((error.abs() <= Z * (variance[finite] / DRAWS).sqrt()).all()), (error, variance)
    if name != "two-layer relu":  # finite fourth moments: the sample variance matches the closed form
        centred = estimates - estimates.mean(0)
        sample_var = centred.square().mean(0)
        # Standard error of the sample variance from the sample's fourth moment (estimates are not Gaussian).
        se = ((centred**4).mean(0) - sample_var.square()).clamp_min(0).div(DRAWS).sqrt()
        assert bool(((sample_var - variance).abs() <= Z * se + 1e-12).all()), (sample_var, variance, se)


def test_deduplication_fewer_repeats_lower_error(float64):
    skeleton = Skeleton.convolutional((4, 4), patch_size=3, num_layers=2, activation="relu")
    x = torch.rand(12, 16, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    exact = skeleton.kernel(x, x)
    errors, repeats = {}, {}
    for dedup in (False, True):
        features = CompositionalFeatures(skeleton, 128, deduplicate=dedup, batch_shape=(40,), seed=9)
        phi = features(x)
        errors[dedup] = torch.linalg.matrix_norm(phi @ phi.mT - exact).square()  # (draws,)
        repeats[dedup] = features.num_repeated.double()
        assert bool((features.num_draws >= 128).all())
    assert float(repeats[True].max()) == 0 and float(repeats[False].mean()) > 10
    # The log of the squared Frobenius error over 40 independent draws (the squared error itself is heavy-tailed:
    # a few draws dominate its mean), compared with a 5-sigma margin of the difference.
    diff = errors[False].log() - errors[True].log()
    assert float(diff.mean()) > Z * float(diff.std()) / math.sqrt(diff.numel()), (
        errors[False].median(),
        errors[True].median(),
    )


@pytest.mark.parametrize("name", ["one-layer exponential", "two-layer relu"])
def test_deduplicated_estimate_is_unbiased(name, float64):
    # Stopping before the draw that would add an (F+1)-th distinct monomial keeps the estimate unbiased
    # (no closed-form variance: the z-bound uses the sample standard error over independent maps).
    skeleton = SKELETONS[name]()
    x, y = _pairs(skeleton.input_dim, seed=1)
    features = CompositionalFeatures(skeleton, 16, batch_shape=(DRAWS,), seed=6)
    estimates = (features(x) * features(y)).sum(-1)
    error = estimates.mean(0) - features.expected_kernel(x, y)
    assert bool((error.abs() <= Z * estimates.std(0) / math.sqrt(DRAWS)).all()), error
    assert bool((features.num_draws > 16).all())


def test_merged_columns_reproduce_all_draws(float64):
    # A linear node with an identity activation has only d + 1 monomials (one per slot of [x, 1]); with F = d + 1
    # the map keeps drawing up to max_draws, and the merged columns carry the counts of all T draws.
    skeleton = Skeleton.fully_connected(3, 1, "identity")
    features = CompositionalFeatures(skeleton, 4, max_draws=2000, seed=0)
    assert int(features.num_draws) == 2000
    counts = features.feature_weight.square() * 2000
    torch.testing.assert_close(counts, counts.round())
    assert float(features.feature_weight.square().sum()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="only 4 distinct monomials"):
        CompositionalFeatures(skeleton, 5, max_draws=500)


def test_cost_per_feature_does_not_grow_with_dimension(float64):
    # Atoms per feature: Poisson(1) for a unit exponential node, whatever d; linear atoms have no entries.
    for dim in (4, 256):
        features = CompositionalFeatures(
            Skeleton.fully_connected(dim, 1, "exponential"), 4000, deduplicate=False, seed=1
        )
        mean = (features.atom_kind != 2).sum() / features.num_features
        assert abs(float(mean) - 1.0) <= Z * math.sqrt(1.0 / 4000)
        assert features.entry_atom.numel() == 0


def test_contract_state_dict_pickle_resample_batch(float64, generator):
    skeleton = Skeleton.convolutional(6, 3, 1, 1, "relu", base_kernel="gaussian")
    x = torch.randn(3, 4, 6, generator=generator)

    def build(batch_shape=(), seed=0):
        return CompositionalFeatures(skeleton, 32, batch_shape=batch_shape, seed=seed)

    features = build((2,), 7)
    phi = features(x.unsqueeze(1))
    assert phi.shape == (3, 2, 4, 32)
    fresh = build((2,), 8)
    fresh.load_state_dict(features.state_dict())
    torch.testing.assert_close(fresh(x.unsqueeze(1)), phi)
    torch.testing.assert_close(pickle.loads(pickle.dumps(features))(x.unsqueeze(1)), phi)
    torch.testing.assert_close(copy.deepcopy(features)(x.unsqueeze(1)), phi)
    # Batch members are independent draws, and indexing one gives the same features as the batch.
    torch.testing.assert_close(features.batch_index((1,))(x), phi[:, 1])
    # resample(generator) redraws; equal generators give equal draws; resample() restores the seeded draws.
    features.resample(torch.Generator().manual_seed(99))
    redrawn = features(x.unsqueeze(1))
    assert not torch.allclose(redrawn, phi)
    fresh.resample(torch.Generator().manual_seed(99))
    torch.testing.assert_close(fresh(x.unsqueeze(1)), redrawn)
    features.resample()
    torch.testing.assert_close(features(x.unsqueeze(1)), phi)
    single = build(seed=3).float()
    assert single(x.float()).dtype == torch.float32
    torch.testing.assert_close(single(x.float()).double(), build(seed=3)(x), rtol=1e-4, atol=1e-5)


def test_device_follows_to(device, float64, generator):
    features = CompositionalFeatures(Skeleton.convolutional((3, 3), 2, 1, 1, "relu"), 16, seed=0)
    x = torch.rand(5, 9, generator=generator)
    expected = features(x)
    moved = features.to(device)
    torch.testing.assert_close(moved(x.to(device)).cpu(), expected)


def test_gradients_are_finite_at_zero_and_repeated_inputs(float64):
    x = torch.zeros(3, 4, requires_grad=True)
    features = CompositionalFeatures(Skeleton.fully_connected(4, 2, "relu"), 32, seed=0)
    (features(x) @ features(x).mT).sum().backward()
    assert torch.isfinite(x.grad).all()


def test_bad_input(float64):
    skeleton = Skeleton.fully_connected(4, 1, "relu")
    with pytest.raises(TypeError, match="Skeleton"):
        CompositionalFeatures("relu", 8)
    with pytest.raises(ValueError, match="num_features"):
        CompositionalFeatures(skeleton, 0)
    with pytest.raises(ValueError, match="input dimension 4"):
        CompositionalFeatures(skeleton, 8, seed=0)(torch.zeros(2, 5))
    with pytest.raises(NotImplementedError, match="deduplicate=False"):
        CompositionalFeatures(skeleton, 8, seed=0).variance(torch.zeros(2, 4), torch.zeros(2, 4))
