"""gprf.features.base: the contract of every random feature map (DESIGN.md §2.1).

The first part checks the contract in depth on RandomFourierFeatures for every sampler. The second part runs the
shipped contract (gprf.testing.FeatureMapTestCase) on every exported concrete FeatureMapBase subclass (``MAP_CASES``) —
one-root and signed maps, composite maps — each built by a small factory; a test fails when an exported class has no
factory, so a new map cannot skip the contract.
"""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch

import gprf.features
from gprf.features import (
    FOURIER_KERNELS,
    FOURIER_SAMPLERS,
    AdditiveFourierFeatures,
    CompositionalFeatures,
    FeatureMap,
    FeatureMapBase,
    MaclaurinFeatures,
    PolynomialSketch,
    QuadratureFeatures,
    RandomFourierFeatures,
    SignedRandomFeatures,
    Skeleton,
    delta_gaussian_spectrum,
)
from gprf.testing import FeatureMapTestCase, build_in, check_resample, random_buffers
from tests.helpers.exports import concrete_exported_classes

pytestmark = pytest.mark.usefixtures("single_thread")

SAMPLERS = FOURIER_SAMPLERS  # iid, orthogonal, structured, qmc
DIM, NUM_FEATURES = 5, 12  # 6 frequencies: two orthogonal blocks; structured pads 5 -> 8


def _build(
    sampler: str = "iid", kernel: str = "rbf", dtype: torch.dtype = torch.float64, **kwargs
) -> RandomFourierFeatures:
    """A map whose buffers are created in ``dtype`` (maps use the default dtype at construction)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        kwargs.setdefault("seed", 0)
        return RandomFourierFeatures(DIM, NUM_FEATURES, kernel, sampler, **kwargs)
    finally:
        torch.set_default_dtype(previous)


def _inputs(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.randn(*shape, DIM, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


# ---------------------------------------------------------------------------------------- attributes
def test_feature_map_is_abstract():
    with pytest.raises(TypeError):
        FeatureMap(2, 4)  # type: ignore[abstract]


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_attributes(sampler):
    feature_map = _build(sampler, batch_shape=(2,))
    assert isinstance(feature_map, FeatureMap) and isinstance(feature_map, torch.nn.Module)
    assert feature_map.input_dim == DIM
    assert feature_map.num_features == NUM_FEATURES
    assert feature_map.root_dim == NUM_FEATURES
    assert feature_map.is_complex is False
    assert feature_map.batch_shape == torch.Size([2])
    assert f"sampler={sampler!r}" in repr(feature_map) and "kernel='rbf'" in repr(feature_map)


# ---------------------------------------------------------------------------------------- shapes
@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize(
    ("batch_shape", "input_batch", "output_batch"),
    [
        ((), (), ()),
        ((), (2, 3), (2, 3)),
        ((4,), (), (4,)),
        ((4,), (4,), (4,)),
        ((4,), (2, 4), (2, 4)),
        ((4,), (2, 1), (2, 4)),
        ((2, 3), (), (2, 3)),
        ((2, 3), (3,), (2, 3)),
    ],
)
def test_output_shapes(sampler, batch_shape, input_batch, output_batch):
    feature_map = _build(sampler, batch_shape=batch_shape)
    out = feature_map(_inputs(*input_batch, 7))
    assert out.shape == (*output_batch, 7, NUM_FEATURES)
    assert out.dtype == torch.float64 and not out.is_complex()


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_batched_inputs_match_unbatched(sampler):
    feature_map = _build(sampler)
    x = _inputs(2, 3, 6)
    out = feature_map(x)
    for i in range(2):
        for j in range(3):
            torch.testing.assert_close(out[i, j], feature_map(x[i, j]))


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_features_are_bounded_and_normalised(sampler):
    # phi(x) = m^-1/2 [cos, sin]: |phi|^2 = 1 for every input.
    out = _build(sampler, kernel="matern32", batch_shape=(3,))(_inputs(9))
    torch.testing.assert_close(out.square().sum(-1), torch.ones(3, 9, dtype=torch.float64))


# ---------------------------------------------------------------------------------------- buffers
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_buffers_created_eagerly(sampler):
    feature_map = _build(sampler, batch_shape=(3,))
    buffers = dict(feature_map.named_buffers())
    assert buffers, "random draws must be registered buffers"
    assert set(feature_map._random_buffer_names) <= set(buffers)
    assert set(feature_map.state_dict()) == set(buffers)
    for value in buffers.values():
        assert value.shape[:1] == (3,)  # buffers carry the batch shape
    assert list(feature_map.parameters()) == []


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_buffers_use_default_dtype(sampler, dtype):
    feature_map = _build(sampler, dtype=dtype)
    for value in random_buffers(feature_map).values():
        assert value.dtype == dtype


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_to_float32_moves_buffers(sampler):
    feature_map = _build(sampler)
    x = _inputs(6)
    expected = feature_map(x)
    feature_map = feature_map.to(torch.float32)
    for value in random_buffers(feature_map).values():
        assert value.dtype == torch.float32
    out = feature_map(x.float())
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, expected.float(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_device(sampler, device, dtype):
    feature_map = _build(sampler, dtype=dtype, batch_shape=(2,))
    x = _inputs(5, dtype=dtype)
    expected = feature_map(x)
    moved = feature_map.to(device)
    for value in random_buffers(moved).values():
        assert value.device.type == device.type
    out = moved(x.to(device))
    assert out.device.type == device.type and out.dtype == dtype
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------------------- serialisation
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_state_dict_round_trip_into_fresh_map(sampler):
    feature_map = _build(sampler, kernel="matern52", batch_shape=(2,), seed=1)
    x = _inputs(6)
    fresh = _build(sampler, kernel="matern52", batch_shape=(2,), seed=2)
    assert not torch.allclose(fresh(x), feature_map(x))
    fresh.load_state_dict(feature_map.state_dict())
    assert torch.equal(fresh(x), feature_map(x))


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_torch_save_round_trip(sampler):
    feature_map = _build(sampler, seed=4)
    buffer = io.BytesIO()
    torch.save(feature_map.state_dict(), buffer)
    buffer.seek(0)
    fresh = _build(sampler, seed=5)
    fresh.load_state_dict(torch.load(buffer))
    x = _inputs(4)
    assert torch.equal(fresh(x), feature_map(x))


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_pickle_and_deepcopy(sampler):
    feature_map = _build(sampler, kernel="matern12", batch_shape=(2,), seed=3)
    x = _inputs(5)
    expected = feature_map(x)
    for clone in (pickle.loads(pickle.dumps(feature_map)), copy.deepcopy(feature_map)):
        assert torch.equal(clone(x), expected)
        for name, value in random_buffers(clone).items():
            assert value.data_ptr() != getattr(feature_map, name).data_ptr()  # an independent copy
        assert clone.batch_shape == feature_map.batch_shape


# ---------------------------------------------------------------------------------------- randomness
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_same_seed_same_features_different_seed_different_features(sampler):
    x = _inputs(6)
    assert torch.equal(_build(sampler, seed=10)(x), _build(sampler, seed=10)(x))
    assert not torch.allclose(_build(sampler, seed=10)(x), _build(sampler, seed=11)(x))


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_resample_with_generator_changes_draws_in_place_and_resample_restores_seed(sampler, float64):
    # (Built and resampled under the same default dtype: see tests/ops/test_qmc.py for why.)
    check_resample(lambda **kwargs: _build(sampler, **kwargs), _inputs(6))


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_resample_keeps_dtype(sampler):
    feature_map = _build(sampler).to(torch.float32)
    feature_map.resample(torch.Generator().manual_seed(1))
    for value in random_buffers(feature_map).values():
        assert value.dtype == torch.float32


def test_unseeded_maps_follow_the_global_rng_without_advancing_it():
    x = _inputs(4)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        state = torch.get_rng_state()
        first = _build("iid", seed=None)
        second = _build("iid", seed=None)
        assert torch.equal(torch.get_rng_state(), state)
        torch.manual_seed(124)
        other = _build("iid", seed=None)
        torch.manual_seed(123)
        again = _build("iid", seed=None)
    assert torch.equal(first(x), again(x))
    assert not torch.allclose(first(x), second(x))
    assert not torch.allclose(first(x), other(x))


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_seeded_construction_does_not_touch_global_rng(sampler):
    state = torch.random.get_rng_state()
    _build(sampler, seed=3).resample(torch.Generator().manual_seed(4))
    assert torch.equal(torch.random.get_rng_state(), state)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_batch_members_are_different_draws(sampler):
    out = _build(sampler, batch_shape=(4,))(_inputs(6))
    for i in range(4):
        for j in range(i):
            assert not torch.allclose(out[i], out[j])


# ---------------------------------------------------------------------------------------- real root
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_real_features_equal_forward(sampler):
    feature_map = _build(sampler, batch_shape=(2,))
    x = _inputs(2, 5)
    assert torch.equal(feature_map.real_features(x), feature_map(x))
    assert feature_map.real_features(x).shape[-1] == feature_map.root_dim


# ---------------------------------------------------------------------------------------- autograd
@pytest.mark.parametrize("sampler", SAMPLERS)
@pytest.mark.parametrize("kernel", ("rbf", "matern32"))
def test_gradcheck_wrt_input(sampler, kernel):
    feature_map = _build(sampler, kernel=kernel, batch_shape=(2,))
    x = _inputs(3).requires_grad_(True)
    assert torch.autograd.gradcheck(feature_map, (x,))


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_gradient_of_kernel_estimate(sampler):
    # d/dx phi(x).phi(y) = -(1/m) sum_i sin(w_i.(x - y)) w_i; compare with autograd through the map.
    feature_map = _build(sampler)
    x = _inputs(1, seed=1).requires_grad_(True)
    y = _inputs(1, seed=2)
    (feature_map(x) * feature_map(y)).sum().backward()
    eye = torch.eye(DIM, dtype=torch.float64)
    w = feature_map.projections(eye)  # (d, m): row j is w_.j
    expected = -(torch.sin((x.detach() - y) @ w) * w).sum(-1).unsqueeze(0) / feature_map.num_frequencies
    torch.testing.assert_close(x.grad, expected)


# ---------------------------------------------------------------------------------------- batch helpers
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_batch_index(sampler):
    feature_map = _build(sampler, batch_shape=(3, 2))
    x = _inputs(5)
    out = feature_map(x)
    single = feature_map.batch_index((1, 0))
    assert single.batch_shape == torch.Size([])
    # The same draws: equal up to rounding (a batched and an unbatched GEMM may sum in another order).
    torch.testing.assert_close(single(x), out[1, 0], rtol=1e-13, atol=1e-13)
    for name, buffer in single.named_buffers():
        assert torch.equal(buffer, getattr(feature_map, name)[1, 0])
    rows = feature_map.batch_index((slice(0, 2),))
    assert rows.batch_shape == torch.Size([2, 2])
    torch.testing.assert_close(rows(x), out[:2], rtol=1e-13, atol=1e-13)
    # The original map is unchanged, and an unbatched map indexes to itself.
    assert feature_map.batch_shape == torch.Size([3, 2]) and torch.equal(feature_map(x), out)
    plain = _build(sampler)
    assert plain.batch_index((0,)) is plain


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_batch_index_returns_an_independent_copy(sampler):
    # Regression: the indexed copy used to hold views of the original's buffers, so resampling the
    # copy silently redrew the original's batch member.
    feature_map = _build(sampler, batch_shape=(2,))
    x = _inputs(4)
    before = feature_map(x)
    member = feature_map.batch_index((0,))
    member.resample(torch.Generator().manual_seed(5))
    assert not torch.allclose(member(x), before[0])
    assert torch.equal(feature_map(x), before)


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_batch_expand(sampler):
    feature_map = _build(sampler)
    x = _inputs(5)
    expanded = feature_map.batch_expand(torch.Size([2, 3]))
    assert expanded.batch_shape == torch.Size([2, 3])
    out = expanded(x)
    assert out.shape == (2, 3, 5, NUM_FEATURES)
    # Expanded, not redrawn: every member has the original features.
    torch.testing.assert_close(out, feature_map(x).expand(2, 3, 5, NUM_FEATURES))
    assert feature_map.batch_shape == torch.Size([])
    # A batched map expands on new leading dimensions.
    batched = _build(sampler, batch_shape=(2,))
    torch.testing.assert_close(batched.batch_expand((4, 2))(x), batched(x).expand(4, 2, 5, NUM_FEATURES))


# ---------------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("num_features", [1, 3, 11])
def test_odd_num_features_suggests_even(num_features):
    with pytest.raises(ValueError, match=f"even.*use {num_features + 1}"):
        RandomFourierFeatures(DIM, num_features, seed=0)


@pytest.mark.parametrize("num_features", [0, -2])
def test_num_features_must_be_positive(num_features):
    with pytest.raises(ValueError, match="num_features"):
        RandomFourierFeatures(DIM, num_features, seed=0)


@pytest.mark.parametrize("input_dim", [0, -1])
def test_input_dim_must_be_positive(input_dim):
    with pytest.raises(ValueError, match="input_dim"):
        RandomFourierFeatures(input_dim, 4, seed=0)


def test_unknown_kernel_lists_valid_choices():
    with pytest.raises(ValueError, match="kernel") as info:
        RandomFourierFeatures(DIM, 4, kernel="laplace", seed=0)
    for name in FOURIER_KERNELS:
        assert repr(name) in str(info.value)


def test_unknown_sampler_lists_valid_choices():
    with pytest.raises(ValueError, match="sampler") as info:
        RandomFourierFeatures(DIM, 4, sampler="sobol", seed=0)
    for name in FOURIER_SAMPLERS:
        assert repr(name) in str(info.value)


@pytest.mark.parametrize("seed", [1.5, "3", True])
def test_seed_must_be_an_int(seed):
    with pytest.raises(TypeError, match="seed"):
        RandomFourierFeatures(DIM, 4, seed=seed)


def test_wrong_input_dimension_names_num_dims():
    with pytest.raises(ValueError, match="num_dims"):
        _build()(torch.zeros(3, DIM + 1, dtype=torch.float64))


def test_one_dimensional_input_is_rejected():
    with pytest.raises(ValueError, match="shape"):
        _build()(torch.zeros(DIM, dtype=torch.float64))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_input_is_rejected(bad):
    x = torch.zeros(3, DIM, dtype=torch.float64)
    x[1, 2] = bad
    with pytest.raises(ValueError, match="NaN or infinite"):
        _build()(x)


@pytest.mark.parametrize("bad_dtype", [torch.int64, torch.int32, torch.bool, torch.complex128])
def test_integer_and_complex_inputs_are_rejected(bad_dtype):
    with pytest.raises(TypeError, match="real floating-point"):
        _build()(torch.zeros(3, DIM, dtype=bad_dtype))


def test_non_tensor_input_is_rejected():
    with pytest.raises(TypeError, match="torch.Tensor"):
        _build()([[0.0] * DIM])


def test_expanded_draws_refuse_to_resample():
    features = RandomFourierFeatures(2, 8, seed=0).batch_expand(torch.Size([3]))
    with pytest.raises(RuntimeError, match="batch_expand"):
        features.resample()


def test_inputs_of_another_dtype_are_computed_in_the_promoted_dtype_for_every_sampler():
    """As torch's type promotion does for GPyTorch's kernels: float32 draws and float64 inputs give float64."""
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for sampler in ("iid", "orthogonal", "structured", "qmc"):
        features = RandomFourierFeatures(3, 8, sampler=sampler, seed=0).float()
        promoted = features(x)
        assert promoted.dtype == torch.float64 and all(
            b.dtype == torch.float32 for b in features.buffers() if b.is_floating_point()
        )
        torch.testing.assert_close(promoted, copy.deepcopy(features).double()(x), rtol=0, atol=0)
        # float32 inputs into float64 draws: computed in float64 as well.
        assert features.double()(x.float()).dtype == torch.float64


def test_closed_forms_check_their_inputs():
    features = RandomFourierFeatures(3, 8, seed=0).double()
    x = torch.zeros(2, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="num_dims=1"):
        features.variance(torch.ones(2, 1, dtype=torch.float64), x)
    with pytest.raises(ValueError, match="row by row"):
        features.expected_kernel(x, torch.zeros(5, 3, dtype=torch.float64))


# ======================================================================================== every map class
# Factories ``(batch_shape, seed) -> map`` of input dimension 4, built in torch's default dtype (as maps build their
# draws). Each exported concrete class needs at least one; variants cover complex features, composite maps (a
# Maclaurin map's draws live in its per-degree sketches) and integer draws (compositional features).
MAP_DIM = 4
MAP_CASES = {
    "additive-second-order": (
        AdditiveFourierFeatures,
        lambda batch_shape, seed: AdditiveFourierFeatures(
            MAP_DIM, 4, order=2, features_per_pair=2, batch_shape=batch_shape, seed=seed
        ),
    ),
    "fourier-iid": (
        RandomFourierFeatures,
        lambda batch_shape, seed: RandomFourierFeatures(
            MAP_DIM, 12, "matern32", "iid", batch_shape=batch_shape, seed=seed
        ),
    ),
    "fourier-structured": (
        RandomFourierFeatures,
        lambda batch_shape, seed: RandomFourierFeatures(
            MAP_DIM, 12, "rbf", "structured", batch_shape=batch_shape, seed=seed
        ),
    ),
    "quadrature-haar": (
        QuadratureFeatures,
        lambda batch_shape, seed: QuadratureFeatures(MAP_DIM, 2, "rbf", "haar", batch_shape=batch_shape, seed=seed),
    ),
    "quadrature-butterfly-arccos1": (
        QuadratureFeatures,
        lambda batch_shape, seed: QuadratureFeatures(
            MAP_DIM, 2, "arccos1", "butterfly", batch_shape=batch_shape, seed=seed
        ),
    ),
    "sketch-gaussian": (
        PolynomialSketch,
        lambda batch_shape, seed: PolynomialSketch(
            MAP_DIM, 8, 2, "gaussian", bias=0.5, batch_shape=batch_shape, seed=seed
        ),
    ),
    "sketch-srht-complex": (
        PolynomialSketch,
        lambda batch_shape, seed: PolynomialSketch(
            MAP_DIM, 8, 3, "srht", complex=True, batch_shape=batch_shape, seed=seed
        ),
    ),
    "sketch-tensorsketch": (
        PolynomialSketch,
        lambda batch_shape, seed: PolynomialSketch(MAP_DIM, 8, 2, "tensorsketch", batch_shape=batch_shape, seed=seed),
    ),
    "maclaurin-gaussian": (
        MaclaurinFeatures,
        lambda batch_shape, seed: MaclaurinFeatures(
            MAP_DIM, 10, "gaussian", "rademacher", allocation=[5, 4], batch_shape=batch_shape, seed=seed
        ),
    ),
    "maclaurin-random-complex": (
        MaclaurinFeatures,
        lambda batch_shape, seed: MaclaurinFeatures(
            MAP_DIM,
            10,
            "exponential",
            "srht",
            complex=True,
            allocation="random",
            max_degree=4,
            batch_shape=batch_shape,
            seed=seed,
        ),
    ),
    "compositional": (
        CompositionalFeatures,
        lambda batch_shape, seed: CompositionalFeatures(
            Skeleton.fully_connected(MAP_DIM, 2, "relu", base_kernel="gaussian"), 16, batch_shape=batch_shape, seed=seed
        ),
    ),
    "compositional-plain": (
        CompositionalFeatures,
        lambda batch_shape, seed: CompositionalFeatures(
            Skeleton.fully_connected(MAP_DIM, 1, "exponential", base_kernel="gaussian"),
            16,
            deduplicate=False,
            batch_shape=batch_shape,
            seed=seed,
        ),
    ),
    "signed-iid": (
        SignedRandomFeatures,
        lambda batch_shape, seed: SignedRandomFeatures(
            MAP_DIM, 6, delta_gaussian_spectrum([1.5, -1.0], [1.0, 0.4]), batch_shape=batch_shape, seed=seed
        ),
    ),
    "signed-orthogonal": (
        SignedRandomFeatures,
        lambda batch_shape, seed: SignedRandomFeatures(
            MAP_DIM,
            6,
            delta_gaussian_spectrum([1.5, -1.0], [1.0, 0.4]),
            "orthogonal",
            batch_shape=batch_shape,
            seed=seed,
        ),
    ),
}


def _map(case: str, dtype: torch.dtype = torch.float64, batch_shape=(), seed: int = 0) -> FeatureMapBase:
    return build_in(dtype, MAP_CASES[case][1], batch_shape=batch_shape, seed=seed)


def test_every_exported_feature_map_has_a_contract_case():
    covered = {cls for cls, _ in MAP_CASES.values()}
    missing = [
        cls.__name__ for cls in concrete_exported_classes(gprf.features, (FeatureMapBase,)) if cls not in covered
    ]
    assert not missing, f"add a factory to MAP_CASES for {missing}"
    for case, (cls, _) in MAP_CASES.items():
        assert type(_map(case)) is cls, case


class TestEveryFeatureMap(FeatureMapTestCase):
    """The kit's feature-map contract (gprf.testing.FeatureMapTestCase) on every case of MAP_CASES."""

    @pytest.fixture(autouse=True, params=sorted(MAP_CASES))
    def case(self, request):
        self.factory = MAP_CASES[request.param][1]

    def create_feature_map(self, batch_shape, seed):
        return self.factory(batch_shape=batch_shape, seed=seed)


# Quadrature rules, TensorSketch's hashes, Maclaurin allocations and de-duplicated weights depend on the number of
# features.
NOT_NESTED = {
    "additive-second-order",
    "compositional",
    "quadrature-haar",
    "quadrature-butterfly-arccos1",
    "sketch-tensorsketch",
    "maclaurin-gaussian",
    "maclaurin-random-complex",
}


@pytest.mark.parametrize("case", MAP_CASES)
def test_maps_nest_their_draws_unless_their_draws_depend_on_the_size(case):
    # The contract checks resized() for maps that nest and the refusal for the others; this pins which are which.
    assert (_map(case).nesting_refusal is None) == (case not in NOT_NESTED)


def test_resized_refuses_bad_sizes_and_expanded_draws():
    feature_map = _build("iid", batch_shape=(2,))
    with pytest.raises(ValueError, match="num_features"):
        feature_map.resized(0)
    with pytest.raises(ValueError, match="even"):
        feature_map.resized(7)
    with pytest.raises(RuntimeError, match="resized: the draws were expanded"):
        _build("iid").batch_expand(torch.Size([3])).resized(4)


def test_draw_versions_are_unique_across_maps():
    first, second = _build("iid", seed=0), _build("iid", seed=0)
    assert first.draw_version != second.draw_version  # equal draws, but separate draw events
    versions = [first.draw_version, second.draw_version]
    first.resample()
    second.load_state_dict(first.state_dict())
    versions += [first.draw_version, second.draw_version, first.resized(4).draw_version]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
