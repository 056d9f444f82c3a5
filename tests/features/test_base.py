"""gprf.features.base: the contract of every random feature map (DESIGN.md §2.1).

The first part checks the contract in depth on RandomFourierFeatures for every sampler. The second part
(``MAP_CASES``) checks it on every exported concrete FeatureMapBase subclass — one-root and signed maps, composite
maps — each built by a small factory; a test fails when an exported class has no factory, so a new map cannot skip
the contract.
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
    SignedFeatureMap,
    SignedRandomFeatures,
    Skeleton,
    delta_gaussian_spectrum,
    real_root,
)
from tests.conftest import concrete_exported_classes
from tests.features.contract import (
    all_draws,
    build_in,
    check_resample_contract,
    kernel_estimate,
    random_buffers,
    real_roots,
)

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
    check_resample_contract(lambda **kwargs: _build(sampler, **kwargs), _inputs(6))


@pytest.mark.parametrize("sampler", SAMPLERS)
def test_resample_keeps_dtype(sampler):
    feature_map = _build(sampler).to(torch.float32)
    feature_map.resample(torch.Generator().manual_seed(1))
    for value in random_buffers(feature_map).values():
        assert value.dtype == torch.float32


def test_unseeded_maps_follow_the_global_rng():
    x = _inputs(4)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(123)
        first = _build("iid", seed=None)
        second = _build("iid", seed=None)
        torch.manual_seed(123)
        again = _build("iid", seed=None)
    assert torch.equal(first(x), again(x))
    assert not torch.allclose(first(x), second(x))


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


def _map_inputs(n: int = 6, seed: int = 0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return 0.5 * torch.randn(n, MAP_DIM, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).to(dtype)


def _assert_roots_equal(first, second, **tolerance) -> None:
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(a, b, **(tolerance or dict(rtol=0, atol=0)))


def _roots_differ(first, second) -> bool:
    return any(not torch.allclose(a, b) for a, b in zip(first, second, strict=True))


def test_every_exported_feature_map_has_a_contract_case():
    covered = {cls for cls, _ in MAP_CASES.values()}
    missing = [
        cls.__name__ for cls in concrete_exported_classes(gprf.features, (FeatureMapBase,)) if cls not in covered
    ]
    assert not missing, f"add a factory to MAP_CASES for {missing}"
    for case, (cls, _) in MAP_CASES.items():
        assert type(_map(case)) is cls, case


@pytest.mark.parametrize("case", MAP_CASES)
def test_contract_draws_are_buffers_that_follow_to(case):
    feature_map = _map(case)
    draws = all_draws(feature_map)
    assert draws, "random draws must be registered buffers"
    assert set(draws) <= set(dict(feature_map.named_buffers())) and set(draws) <= set(feature_map.state_dict())
    assert list(feature_map.parameters()) == []
    x = _map_inputs()
    expected = real_roots(feature_map, x)
    single = feature_map.to(torch.float32)
    for name, draw in all_draws(single).items():
        assert draw.dtype == (torch.float32 if draw.is_floating_point() else draws[name].dtype), name
    roots = real_roots(single, x.float())
    # float32 draws and inputs: relative rounding 6e-8 per operation over a few dozen operations (projections of
    # 4 inputs, cosines or products of up to 3 factors); 1e-5 of the largest entry leaves a margin of ~100.
    for root, reference in zip(roots, expected, strict=True):
        assert root.dtype == torch.float32
        torch.testing.assert_close(root.double(), reference, rtol=0, atol=1e-5 * float(reference.abs().max()))
    # And back: float64 draws (the float32-rounded values) give float64 features.
    double = single.to(torch.float64)
    assert all(draw.dtype == torch.float64 for draw in all_draws(double).values() if draw.is_floating_point())
    for root, reference in zip(real_roots(double, x), expected, strict=True):
        assert root.dtype == torch.float64
        torch.testing.assert_close(root, reference, rtol=0, atol=1e-5 * float(reference.abs().max()))


@pytest.mark.parametrize("case", MAP_CASES)
def test_contract_state_dict_into_a_map_built_with_another_seed(case):
    x = _map_inputs()
    feature_map, fresh = _map(case, batch_shape=(2,), seed=1), _map(case, batch_shape=(2,), seed=2)
    assert _roots_differ(real_roots(fresh, x), real_roots(feature_map, x))
    fresh.load_state_dict(feature_map.state_dict())
    _assert_roots_equal(real_roots(fresh, x), real_roots(feature_map, x))


@pytest.mark.parametrize("case", MAP_CASES)
def test_contract_pickle_and_deepcopy_reproduce_the_features(case):
    feature_map = _map(case, batch_shape=(2,), seed=3)
    x = _map_inputs()
    expected = real_roots(feature_map, x)
    for clone in (pickle.loads(pickle.dumps(feature_map)), copy.deepcopy(feature_map)):
        _assert_roots_equal(real_roots(clone, x), expected)
        for name, draw in all_draws(clone).items():
            assert draw.data_ptr() != all_draws(feature_map)[name].data_ptr(), name  # an independent copy


@pytest.mark.parametrize("case", MAP_CASES)
def test_contract_resample_changes_the_draws_and_bumps_the_version(case):
    feature_map = _map(case, seed=4)
    x = _map_inputs()
    original, version = real_roots(feature_map, x), feature_map.draw_version
    feature_map.resample(torch.Generator().manual_seed(99))
    assert feature_map.draw_version > version
    assert _roots_differ(real_roots(feature_map, x), original)
    version = feature_map.draw_version
    feature_map.resample()  # a seeded map redraws the features it was built with
    assert feature_map.draw_version > version
    _assert_roots_equal(real_roots(feature_map, x), original)


@pytest.mark.parametrize("case", MAP_CASES)
def test_contract_batch_members_are_distinct_draws_and_batch_index_selects_one(case):
    feature_map = _map(case, batch_shape=(3,), seed=5)
    x = _map_inputs()
    roots = real_roots(feature_map, x)
    for root in roots:
        assert root.shape == (3, 6, feature_map.root_dim)
    for i, j in ((0, 1), (0, 2), (1, 2)):
        assert _roots_differ([r[i] for r in roots], [r[j] for r in roots]), (i, j)
    member = feature_map.batch_index((1,))
    assert member.batch_shape == torch.Size()
    # The same draws; a batched and an unbatched product may sum in another order.
    _assert_roots_equal(real_roots(member, x), [r[1] for r in roots], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", MAP_CASES)
def test_contract_inputs_of_another_dtype_are_computed_in_the_promoted_dtype(case):
    single = _map(case, dtype=torch.float32, seed=6)
    x = _map_inputs()
    promoted = real_roots(single, x)
    assert all(root.dtype == torch.float64 for root in promoted)
    assert all(draw.dtype == torch.float32 for draw in all_draws(single).values() if draw.is_floating_point())
    # The float32 draws promoted for the call: the numbers of a float64 copy of the map.
    _assert_roots_equal(promoted, real_roots(copy.deepcopy(single).double(), x))
    assert all(root.dtype == torch.float64 for root in real_roots(_map(case, seed=6), x.float()))


@pytest.mark.parametrize("case", MAP_CASES)
def test_contract_num_features_and_root_dim(case):
    feature_map = _map(case)
    x = _map_inputs()
    if isinstance(feature_map, SignedFeatureMap):
        a, b = feature_map(x)
        assert a.shape == b.shape == (6, feature_map.root_dim) and not a.is_complex()
        signature = feature_map.signature(torch.float64)
        expected = torch.cat([torch.ones(feature_map.root_dim), -torch.ones(feature_map.root_dim)]).double()
        torch.testing.assert_close(signature, expected, rtol=0, atol=0)
        torch.testing.assert_close(
            kernel_estimate(feature_map, x), torch.cat([a, b], -1) @ torch.diag(signature) @ torch.cat([a, b], -1).mT
        )
        return
    phi = feature_map(x)
    assert phi.shape == (6, feature_map.num_features) and phi.is_complex() == feature_map.is_complex
    assert feature_map.root_dim == (2 if feature_map.is_complex else 1) * feature_map.num_features
    root = feature_map.real_features(x)
    assert root.shape == (6, feature_map.root_dim) and not root.is_complex()
    torch.testing.assert_close(root, real_root(phi), rtol=0, atol=0)
    torch.testing.assert_close(root @ root.mT, kernel_estimate(feature_map, x))


@pytest.mark.parametrize("case", MAP_CASES)
def test_contract_nan_input_is_a_clear_error_on_the_cpu(case):
    x = _map_inputs()
    x[2, 1] = float("nan")
    with pytest.raises(ValueError, match=f"{MAP_CASES[case][0].__name__} received NaN or infinite inputs"):
        _map(case)(x)


@pytest.mark.parametrize("case", MAP_CASES)
def test_contract_expanded_draws_refuse_to_resample(case):
    expanded = _map(case).batch_expand(torch.Size([3]))
    roots = real_roots(expanded, _map_inputs())
    # Expanded, not redrawn: the members share the draws (equal up to the summation order of batched products).
    _assert_roots_equal([r[0] for r in roots], [r[2] for r in roots], rtol=1e-12, atol=1e-12)
    with pytest.raises(RuntimeError, match="batch_expand"):
        expanded.resample(torch.Generator().manual_seed(1))


# ---------------------------------------------------------------------------------------- nested draws (resized)
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


def _resizes(feature_map: FeatureMapBase) -> tuple[int, int]:
    """A smaller and a larger valid size (random Fourier features need an even number)."""
    f = feature_map.num_features
    return max(2, f // 4 * 2), 2 * f + 6


@pytest.mark.parametrize("case", MAP_CASES)
def test_contract_resized_nests_or_refuses_clearly(case):
    feature_map = _map(case, batch_shape=(2,), seed=7)
    if case in NOT_NESTED:
        with pytest.raises(NotImplementedError, match=rf"{type(feature_map).__name__} cannot be resized: .*; "):
            feature_map.resized(4)
        return
    draws, version = {name: draw.clone() for name, draw in all_draws(feature_map).items()}, feature_map.draw_version
    small, large = _resizes(feature_map)
    shrunk = feature_map.resized(small)
    grown = feature_map.resized(large)
    assert (shrunk.num_features, grown.num_features) == (small, large)
    # The original is unchanged; every resized map is a new draw with a version of its own.
    for name, draw in all_draws(feature_map).items():
        assert torch.equal(draw, draws[name]), name
    assert feature_map.draw_version == version
    assert len({version, shrunk.draw_version, grown.draw_version}) == 3
    # Shrinking then growing back (and growing then shrinking back) returns the draws bit for bit.
    for back in (shrunk.resized(feature_map.num_features), grown.resized(feature_map.num_features)):
        for name, draw in all_draws(back).items():
            assert torch.equal(draw, draws[name]), name
    # Same configuration, batch shape and dtype; the new size's roots.
    x = _map_inputs()
    for resized, size in ((shrunk, small), (grown, large)):
        assert type(resized) is type(feature_map) and resized.batch_shape == feature_map.batch_shape
        assert all(draw.dtype == draws[name].dtype for name, draw in all_draws(resized).items())
        expected_dim = feature_map.root_dim * size // feature_map.num_features
        assert all(root.shape == (2, 6, expected_dim) for root in real_roots(resized, x))


@pytest.mark.parametrize("case", sorted(set(MAP_CASES) - NOT_NESTED))
def test_contract_resized_with_a_generator_appends_an_independent_continuation(case):
    feature_map = _map(case, seed=7)
    large = 2 * feature_map.num_features + 6
    default, other = feature_map.resized(large), feature_map.resized(large, torch.Generator().manual_seed(3))
    again = feature_map.resized(large, torch.Generator().manual_seed(3))
    x = _map_inputs()
    assert _roots_differ(real_roots(default, x), real_roots(other, x))
    _assert_roots_equal(real_roots(other, x), real_roots(again, x))
    # Back to the original size: the original draws, whatever continued them.
    _assert_roots_equal(real_roots(other.resized(feature_map.num_features), x), real_roots(feature_map, x))


@pytest.mark.parametrize("case", sorted(set(MAP_CASES) - NOT_NESTED))
def test_contract_resized_map_round_trips_state_dict_and_pickle(case):
    feature_map = _map(case, batch_shape=(2,), seed=7)
    grown = feature_map.resized(2 * feature_map.num_features + 6, torch.Generator().manual_seed(1))
    x = _map_inputs()
    fresh = _map(case, batch_shape=(2,), seed=8).resized(grown.num_features)
    assert _roots_differ(real_roots(fresh, x), real_roots(grown, x))
    fresh.load_state_dict(grown.state_dict())  # a stream with two segments into one with one
    _assert_roots_equal(real_roots(fresh, x), real_roots(grown, x))
    # The loaded stream continues like the original.
    _assert_roots_equal(
        real_roots(fresh.resized(4 * feature_map.num_features), x),
        real_roots(grown.resized(4 * feature_map.num_features), x),
    )
    clone = pickle.loads(pickle.dumps(grown))
    _assert_roots_equal(real_roots(clone.resized(feature_map.num_features), x), real_roots(feature_map, x))


@pytest.mark.parametrize("case", sorted(set(MAP_CASES) - NOT_NESTED))
def test_contract_resized_float32_map_keeps_its_dtype_and_prefix(case):
    single = _map(case, dtype=torch.float32, seed=7)
    back = single.resized(2 * single.num_features + 6).resized(single.num_features)
    for name, draw in all_draws(back).items():
        assert torch.equal(draw, all_draws(single)[name]), name
        assert draw.dtype == all_draws(single)[name].dtype


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
