r"""The feature-map contract as a test case: what every gprf feature map keeps, checked on a new one.

A new map's tests inherit :class:`FeatureMapTestCase` and say how to build the map::

    from gprf.testing import FeatureMapTestCase


    class TestMyFeatures(FeatureMapTestCase):
        def create_feature_map(self, batch_shape, seed):
            return MyFeatures(4, 16, batch_shape=batch_shape, seed=seed)

pytest then runs every check of the contract of :class:`~gprf.features.FeatureMapBase` on it: draws are buffers
that follow ``.to()`` (dtype and device), ``state_dict`` into a map built with another seed, pickling and
``deepcopy``; batch members are independent draws; :meth:`~gprf.features.FeatureMapBase.resample` changes the draws
and the draw version; inputs of another dtype are computed in the promoted one; the roots have ``root_dim``
columns; bad inputs are clear errors; :meth:`~gprf.features.FeatureMapBase.resized` nests the draws (or refuses
with the map's reason); and where the map has the closed forms ``expected_kernel`` and ``variance``, the estimate is
unbiased within a z-bound of the closed-form standard error (:mod:`gprf.testing.statistics`).

The readers below (:func:`~gprf.testing.real_roots`, :func:`~gprf.testing.kernel_estimate`,
:func:`~gprf.testing.all_draws`...) read maps of either kind (one root, or two roots of a
:class:`~gprf.features.SignedFeatureMap`) and are usable on their own.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Sequence

import pytest
import torch
from torch import Tensor

from gprf.features import FeatureMap, FeatureMapBase, SignedFeatureMap
from gprf.testing.fixtures import DEVICES, default_dtype
from gprf.testing.statistics import assert_unbiased


def random_buffers(feature_map: FeatureMapBase) -> dict[str, Tensor]:
    """The map's own random draws (not those of maps inside it), by buffer name."""
    return {name: getattr(feature_map, name) for name in feature_map._random_buffer_names}


def all_draws(feature_map: FeatureMapBase) -> dict[str, Tensor]:
    """Every random draw of the map and of the maps inside it (e.g. a Maclaurin map's sketches), by qualified name."""
    draws = {}
    for prefix, module in feature_map.named_modules():
        if isinstance(module, FeatureMapBase):
            for name in module._random_buffer_names:
                draws[f"{prefix}.{name}" if prefix else name] = getattr(module, name)
    return draws


def real_roots(feature_map: FeatureMapBase, x: Tensor) -> tuple[Tensor, ...]:
    """The real roots of the map at ``x``: ``(R,)`` for a FeatureMap, ``(A, B)`` for a SignedFeatureMap."""
    if isinstance(feature_map, SignedFeatureMap):
        return tuple(feature_map(x))
    return (feature_map.real_features(x),)


def kernel_estimate(feature_map: FeatureMapBase, x: Tensor) -> Tensor:
    r"""The map's kernel matrix at ``x``: :math:`\mathrm{Re}\,\Phi\Phi^H` or :math:`AA^\top - BB^\top`."""
    if isinstance(feature_map, SignedFeatureMap):
        a, b = feature_map(x)
        return a @ a.mT - b @ b.mT
    phi = feature_map(x)
    return (phi @ phi.conj().mT).real


def paired_estimate(feature_map: FeatureMapBase, x1: Tensor, x2: Tensor) -> Tensor:
    r""":math:`\hat k(x1_i, x2_i)` row by row (the real part for complex maps), the estimate ``expected_kernel`` and
    ``variance`` describe."""
    roots1, roots2 = real_roots(feature_map, x1), real_roots(feature_map, x2)
    values = [(first * second).sum(-1) for first, second in zip(roots1, roots2, strict=True)]
    return values[0] if len(values) == 1 else values[0] - values[1]


def build_in(dtype: torch.dtype, factory: Callable[..., FeatureMapBase], *args, **kwargs) -> FeatureMapBase:
    """``factory(*args, **kwargs)`` with ``dtype`` as torch's default dtype: maps create their draws in it."""
    with default_dtype(dtype):
        return factory(*args, **kwargs)


def check_resample(build: Callable[..., FeatureMap], x: Tensor) -> Tensor:
    """``resample(generator)`` redraws in place, equal generators give equal draws, ``resample()`` restores the seed.

    ``build(batch_shape=..., seed=...)`` constructs the map. Returns the features of the original draw.
    """
    feature_map = build(batch_shape=(2,), seed=7)
    original = feature_map(x)
    pointers = {name: value.data_ptr() for name, value in random_buffers(feature_map).items()}
    feature_map.resample(torch.Generator().manual_seed(99))
    redrawn = feature_map(x)
    assert not torch.allclose(redrawn, original)
    assert {name: value.data_ptr() for name, value in random_buffers(feature_map).items()} == pointers
    # A generator with the same state gives the same draws ...
    other = build(batch_shape=(2,), seed=8)
    other.resample(torch.Generator().manual_seed(99))
    assert torch.equal(other(x), redrawn)
    # ... and resample() without a generator redraws the map's own seeded features.
    feature_map.resample()
    assert torch.equal(feature_map(x), original)
    return original


def assert_roots_equal(first: Sequence[Tensor], second: Sequence[Tensor], **tolerance) -> None:
    """Equal roots, bit for bit unless a ``torch.testing.assert_close`` tolerance is given."""
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(a, b, **(tolerance or dict(rtol=0, atol=0)))


def roots_differ(first: Sequence[Tensor], second: Sequence[Tensor]) -> bool:
    """Whether any pair of roots differs beyond rounding."""
    return any(not torch.allclose(a, b) for a, b in zip(first, second, strict=True))


class FeatureMapTestCase:
    """The contract of gprf's feature maps as pytest test methods: subclass it (a class named ``Test...``) and
    implement :meth:`create_feature_map`.

    Maps are built in float64 unless a check says otherwise (:meth:`build`), inputs are ``num_points`` rows of
    :meth:`create_inputs`. The unbiasedness check averages ``unbiasedness_draws`` independent draws (a batch of
    maps) at ``num_points`` pairs of points and fails a correct map with probability ``false_alarm``; it applies to
    maps whose ``expected_kernel`` and ``variance`` are both implemented. Override a check (with a docstring saying
    why) where the contract does not apply to a map.
    """

    num_points = 6
    unbiasedness_draws = 2000
    false_alarm = 1e-6

    def create_feature_map(self, batch_shape: torch.Size, seed: int) -> FeatureMapBase:
        """The map under test with ``batch_shape`` independent draws from ``seed``, built in the default dtype."""
        raise NotImplementedError(f"{type(self).__name__} must implement create_feature_map(batch_shape, seed).")

    def build(self, batch_shape=(), seed: int = 0, dtype: torch.dtype = torch.float64) -> FeatureMapBase:
        """:meth:`create_feature_map` with draws in ``dtype``."""
        return build_in(dtype, self.create_feature_map, batch_shape=torch.Size(batch_shape), seed=seed)

    def create_inputs(self, num_points: int | None = None, seed: int = 0, dtype: torch.dtype = torch.float64) -> Tensor:
        """``num_points`` inputs of the map's dimension: standard normal rows scaled by 0.5."""
        input_dim = self.build().input_dim
        generator = torch.Generator().manual_seed(seed)
        x = 0.5 * torch.randn(num_points or self.num_points, input_dim, generator=generator, dtype=torch.float64)
        return x.to(dtype)

    # ---------------------------------------------------------------------------------------- draws and .to()
    def test_draws_are_buffers_that_follow_to(self):
        feature_map = self.build()
        draws = all_draws(feature_map)
        assert draws, "random draws must be registered buffers (FeatureMapBase._register_draws)"
        assert set(draws) <= set(dict(feature_map.named_buffers())) and set(draws) <= set(feature_map.state_dict())
        assert list(feature_map.parameters()) == [], "a feature map holds draws, not parameters"
        x = self.create_inputs()
        expected = real_roots(feature_map, x)
        single = feature_map.to(torch.float32)
        for name, draw in all_draws(single).items():
            assert draw.dtype == (torch.float32 if draw.is_floating_point() else draws[name].dtype), name
        roots = real_roots(single, x.float())
        # float32 draws and inputs: relative rounding 6e-8 per operation over a few dozen operations (projections,
        # cosines or products of a few factors); 1e-5 of the largest entry leaves a margin of ~100.
        for root, reference in zip(roots, expected, strict=True):
            assert root.dtype == torch.float32
            torch.testing.assert_close(root.double(), reference, rtol=0, atol=1e-5 * float(reference.abs().max()))
        # And back: float64 draws (the float32-rounded values) give float64 features.
        double = single.to(torch.float64)
        assert all(draw.dtype == torch.float64 for draw in all_draws(double).values() if draw.is_floating_point())
        for root, reference in zip(real_roots(double, x), expected, strict=True):
            assert root.dtype == torch.float64
            torch.testing.assert_close(root, reference, rtol=0, atol=1e-5 * float(reference.abs().max()))

    @pytest.mark.parametrize("device", DEVICES)
    def test_draws_and_features_follow_the_device(self, device):
        feature_map = self.build(batch_shape=(2,))
        x = self.create_inputs()
        expected = real_roots(feature_map, x)
        moved = feature_map.to(device)
        assert all(draw.device.type == torch.device(device).type for draw in all_draws(moved).values())
        roots = real_roots(moved, x.to(device))
        assert all(root.device.type == torch.device(device).type for root in roots)
        # The same float64 operations on another device: equal up to the order of summation.
        assert_roots_equal([root.cpu() for root in roots], expected, rtol=1e-10, atol=1e-10)

    # ---------------------------------------------------------------------------------------- shapes and batches
    def test_shapes_and_batch_broadcasting(self):
        feature_map = self.build(batch_shape=(3,))
        x = self.create_inputs()
        roots = real_roots(feature_map, x)
        assert all(root.shape == (3, self.num_points, feature_map.root_dim) for root in roots)
        # Inputs with batch dimensions broadcast against the map's batch: (2, 1, n, d) with (3,) gives (2, 3, ...).
        stacked = torch.stack([x, 2 * x]).unsqueeze(1)
        batched = real_roots(feature_map, stacked)
        assert all(root.shape == (2, 3, self.num_points, feature_map.root_dim) for root in batched)
        assert_roots_equal([root[0] for root in batched], roots, rtol=1e-12, atol=1e-12)
        assert_roots_equal([root[1] for root in batched], real_roots(feature_map, 2 * x), rtol=1e-12, atol=1e-12)

    def test_num_features_and_root_dim(self):
        feature_map = self.build()
        x = self.create_inputs()
        if isinstance(feature_map, SignedFeatureMap):
            a, b = feature_map(x)
            assert a.shape == b.shape == (self.num_points, feature_map.root_dim) and not a.is_complex()
            signature = feature_map.signature(torch.float64)
            ones = torch.ones(feature_map.root_dim, dtype=torch.float64)
            torch.testing.assert_close(signature, torch.cat([ones, -ones]), rtol=0, atol=0)
            roots = torch.cat([a, b], -1)
            torch.testing.assert_close(kernel_estimate(feature_map, x), roots @ torch.diag(signature) @ roots.mT)
            return
        phi = feature_map(x)
        assert phi.shape == (self.num_points, feature_map.num_features) and phi.is_complex() == feature_map.is_complex
        assert feature_map.root_dim == (2 if feature_map.is_complex else 1) * feature_map.num_features
        root = feature_map.real_features(x)
        assert root.shape == (self.num_points, feature_map.root_dim) and not root.is_complex()
        torch.testing.assert_close(root @ root.mT, kernel_estimate(feature_map, x))

    def test_batch_members_are_distinct_draws_and_batch_index_selects_one(self):
        feature_map = self.build(batch_shape=(3,), seed=5)
        roots = real_roots(feature_map, self.create_inputs())
        for i, j in ((0, 1), (0, 2), (1, 2)):
            assert roots_differ([r[i] for r in roots], [r[j] for r in roots]), (i, j)
        member = feature_map.batch_index((1,))
        assert member.batch_shape == torch.Size()
        # The same draws; a batched and an unbatched product may sum in another order.
        assert_roots_equal(real_roots(member, self.create_inputs()), [r[1] for r in roots], rtol=1e-12, atol=1e-12)

    def test_expanded_draws_refuse_to_resample(self):
        expanded = self.build().batch_expand(torch.Size([3]))
        roots = real_roots(expanded, self.create_inputs())
        # Expanded, not redrawn: the members share the draws (equal up to the summation order of batched products).
        assert_roots_equal([r[0] for r in roots], [r[2] for r in roots], rtol=1e-12, atol=1e-12)
        with pytest.raises(RuntimeError, match="batch_expand"):
            expanded.resample(torch.Generator().manual_seed(1))

    def test_inputs_of_another_dtype_are_computed_in_the_promoted_dtype(self):
        single = self.build(dtype=torch.float32, seed=6)
        x = self.create_inputs()
        promoted = real_roots(single, x)
        assert all(root.dtype == torch.float64 for root in promoted)
        assert all(draw.dtype == torch.float32 for draw in all_draws(single).values() if draw.is_floating_point())
        # The float32 draws promoted for the call: the numbers of a float64 copy of the map.
        assert_roots_equal(promoted, real_roots(copy.deepcopy(single).double(), x))
        assert all(root.dtype == torch.float64 for root in real_roots(self.build(seed=6), x.float()))

    # ---------------------------------------------------------------------------------------- serialisation
    def test_state_dict_into_a_map_built_with_another_seed(self):
        x = self.create_inputs()
        feature_map, fresh = self.build(batch_shape=(2,), seed=1), self.build(batch_shape=(2,), seed=2)
        assert roots_differ(real_roots(fresh, x), real_roots(feature_map, x))
        version = fresh.draw_version
        fresh.load_state_dict(feature_map.state_dict())
        assert_roots_equal(real_roots(fresh, x), real_roots(feature_map, x))
        assert fresh.draw_version > version, "loading draws is a new draw: it takes a new draw_version"

    def test_pickle_and_deepcopy_reproduce_the_features(self):
        feature_map = self.build(batch_shape=(2,), seed=3)
        x = self.create_inputs()
        expected = real_roots(feature_map, x)
        for clone in (pickle.loads(pickle.dumps(feature_map)), copy.deepcopy(feature_map)):
            assert_roots_equal(real_roots(clone, x), expected)
            assert clone.batch_shape == feature_map.batch_shape
            for name, draw in all_draws(clone).items():
                assert draw.data_ptr() != all_draws(feature_map)[name].data_ptr(), name  # an independent copy

    # ---------------------------------------------------------------------------------------- randomness
    def test_resample_changes_the_draws_and_bumps_the_version(self):
        feature_map = self.build(seed=4)
        x = self.create_inputs()
        original, version = real_roots(feature_map, x), feature_map.draw_version
        feature_map.resample(torch.Generator().manual_seed(99))
        assert feature_map.draw_version > version
        assert roots_differ(real_roots(feature_map, x), original)
        version = feature_map.draw_version
        feature_map.resample()  # a seeded map redraws the features it was built with
        assert feature_map.draw_version > version
        assert_roots_equal(real_roots(feature_map, x), original)

    def test_same_seed_same_draws_and_construction_leaves_the_global_rng_alone(self):
        x = self.create_inputs()
        state = torch.random.get_rng_state()
        first, second, other = self.build(seed=10), self.build(seed=10), self.build(seed=11)
        assert torch.equal(torch.random.get_rng_state(), state), "a seeded map must draw from its own generator"
        assert_roots_equal(real_roots(first, x), real_roots(second, x))
        assert roots_differ(real_roots(first, x), real_roots(other, x))

    def test_nan_input_is_a_clear_error(self):
        feature_map = self.build()
        x = self.create_inputs()
        x[2, 0] = float("nan")
        with pytest.raises(ValueError, match=f"{type(feature_map).__name__} received NaN or infinite inputs"):
            feature_map(x)

    def test_unbiased_within_the_closed_form_standard_error(self):
        feature_map = self.build()
        x1, x2 = self.create_inputs(seed=1), self.create_inputs(seed=2)
        try:
            expected = feature_map.expected_kernel(x1, x2)
            variance = feature_map.variance(x1, x2)
        except NotImplementedError as error:
            pytest.skip(f"no closed-form mean and variance to check against: {error}")
        draws = self.build(batch_shape=(self.unbiasedness_draws,), seed=12345)
        assert_unbiased(paired_estimate(draws, x1, x2), expected, variance, self.false_alarm)

    # ---------------------------------------------------------------------------------------- nested draws
    def _resizes(self, feature_map: FeatureMapBase) -> tuple[int, int]:
        """A smaller and a larger valid size (even, for maps of cosine-sine pairs)."""
        f = feature_map.num_features
        return max(2, f // 4 * 2), 2 * f + 6

    def test_resized_nests_or_refuses_clearly(self):
        feature_map = self.build(batch_shape=(2,), seed=7)
        if feature_map.nesting_refusal is not None:
            with pytest.raises(NotImplementedError, match=rf"{type(feature_map).__name__} cannot be resized: .*"):
                feature_map.resized(4)
            return
        draws, version = {name: draw.clone() for name, draw in all_draws(feature_map).items()}, feature_map.draw_version
        small, large = self._resizes(feature_map)
        shrunk, grown = feature_map.resized(small), feature_map.resized(large)
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
        x = self.create_inputs()
        for resized, size in ((shrunk, small), (grown, large)):
            assert type(resized) is type(feature_map) and resized.batch_shape == feature_map.batch_shape
            assert all(draw.dtype == draws[name].dtype for name, draw in all_draws(resized).items())
            expected_dim = feature_map.root_dim * size // feature_map.num_features
            assert all(root.shape == (2, self.num_points, expected_dim) for root in real_roots(resized, x))

    def _nesting_map(self, **kwargs) -> FeatureMapBase:
        feature_map = self.build(**kwargs)
        if feature_map.nesting_refusal is not None:
            pytest.skip(f"{type(feature_map).__name__} cannot be resized: {feature_map.nesting_refusal}")
        return feature_map

    def test_resized_with_a_generator_appends_an_independent_continuation(self):
        feature_map = self._nesting_map(seed=7)
        large = 2 * feature_map.num_features + 6
        default, other = feature_map.resized(large), feature_map.resized(large, torch.Generator().manual_seed(3))
        again = feature_map.resized(large, torch.Generator().manual_seed(3))
        x = self.create_inputs()
        assert roots_differ(real_roots(default, x), real_roots(other, x))
        assert_roots_equal(real_roots(other, x), real_roots(again, x))
        # Back to the original size: the original draws, whatever continued them.
        assert_roots_equal(real_roots(other.resized(feature_map.num_features), x), real_roots(feature_map, x))

    def test_resized_map_round_trips_state_dict_and_pickle(self):
        feature_map = self._nesting_map(batch_shape=(2,), seed=7)
        grown = feature_map.resized(2 * feature_map.num_features + 6, torch.Generator().manual_seed(1))
        x = self.create_inputs()
        fresh = self.build(batch_shape=(2,), seed=8).resized(grown.num_features)
        assert roots_differ(real_roots(fresh, x), real_roots(grown, x))
        fresh.load_state_dict(grown.state_dict())  # a stream with two segments into one with one
        assert_roots_equal(real_roots(fresh, x), real_roots(grown, x))
        # The loaded stream continues like the original.
        assert_roots_equal(
            real_roots(fresh.resized(4 * feature_map.num_features), x),
            real_roots(grown.resized(4 * feature_map.num_features), x),
        )
        clone = pickle.loads(pickle.dumps(grown))
        assert_roots_equal(real_roots(clone.resized(feature_map.num_features), x), real_roots(feature_map, x))

    def test_resized_float32_map_keeps_its_dtype_and_prefix(self):
        single = self._nesting_map(dtype=torch.float32, seed=7)
        back = single.resized(2 * single.num_features + 6).resized(single.num_features)
        for name, draw in all_draws(back).items():
            assert torch.equal(draw, all_draws(single)[name]), name
            assert draw.dtype == all_draws(single)[name].dtype
