"""gprf.features.nested: globally unique draw versions, stream generators, chunked streams with segments and the
conditional Haar completion of orthonormal rows."""

from __future__ import annotations

import pickle

import torch

from gprf.features import RandomFourierFeatures
from gprf.features.nested import (
    chunked_units,
    complete_orthonormal_rows,
    mixed_seed,
    next_draw_version,
    observe_draw_version,
    stream_generator,
)


def test_draw_versions_increase_and_move_past_observed_ones():
    first = next_draw_version()
    assert next_draw_version() > first
    observe_draw_version(first + 1000)
    assert next_draw_version() > first + 1000


def test_an_unpickled_map_keeps_its_version_and_later_draws_get_larger_ones():
    feature_map = RandomFourierFeatures(3, 8, seed=0)
    state = pickle.dumps(feature_map)
    observe_draw_version(0)  # no effect on a counter already past 0
    clone = pickle.loads(state)
    assert clone.draw_version == feature_map.draw_version
    assert RandomFourierFeatures(3, 8, seed=0).draw_version > clone.draw_version


def test_stream_generators_depend_on_seed_and_chunk_only():
    draw = lambda seed, chunk: torch.rand(4, generator=stream_generator(seed, chunk))  # noqa: E731
    assert torch.equal(draw(5, 2), draw(5, 2))
    assert not torch.equal(draw(5, 2), draw(5, 3)) and not torch.equal(draw(5, 2), draw(6, 2))


def test_mixed_seeds_are_reproducible_distinct_and_valid_for_any_int_seed():
    seeds = {mixed_seed(seed, key) for seed in (-3, 0, 1, 2**70 + 5) for key in (0, 1, 2)}
    assert len(seeds) == 12 and all(0 <= seed < 2**63 for seed in seeds)
    assert mixed_seed(7, 1) == mixed_seed(7, 1)
    torch.Generator().manual_seed(max(seeds))  # a valid torch seed


def _uniform_chunk(generator, chunk, head):
    return {"u": torch.rand(3, generator=generator, dtype=torch.float64)}


def test_chunked_units_read_prefixes_of_one_stream_and_switch_streams_at_segment_starts():
    one = [(0, 11)]
    full = chunked_units(one, 8, 3, _uniform_chunk, {"u": 0})["u"]
    assert full.shape == (8,)
    for size in (1, 3, 5):
        assert torch.equal(chunked_units(one, size, 3, _uniform_chunk, {"u": 0})["u"], full[:size])
    # Units 4.. from stream 12: chunk 1 of stream 12 supplies units 4-5, chunk 2 units 6-7.
    two = chunked_units([(0, 11), (4, 12)], 8, 3, _uniform_chunk, {"u": 0})["u"]
    assert torch.equal(two[:4], full[:4])
    other = chunked_units([(0, 12)], 8, 3, _uniform_chunk, {"u": 0})["u"]
    assert torch.equal(two[4:], other[4:])


def test_completed_rows_are_orthonormal_and_orthogonal_to_the_given_rows():
    rows = torch.linalg.qr(torch.randn(6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)).Q[:2]
    completion = complete_orthonormal_rows(rows, torch.Generator().manual_seed(1))
    block = torch.cat([rows, completion])
    assert completion.shape == (4, 6)
    torch.testing.assert_close(block @ block.mT, torch.eye(6, dtype=torch.float64), rtol=0, atol=1e-12)


def test_completed_rows_are_uniform_in_the_complement():
    # Conditional Haar law: a completed row is uniform on the unit sphere of the complement, so its second moment
    # is P / (d - k) with P the projection on the complement. Each entry of the mean of r r^T over 1000 rows has a
    # standard deviation below 1/sqrt(1000 * (d - k)) (entries of a uniform unit vector have variance <= 1/(d-k)).
    d, k, n = 5, 2, 1000
    rows = torch.eye(d, dtype=torch.float64)[:k]
    generator = torch.Generator().manual_seed(2)
    completions = torch.stack([complete_orthonormal_rows(rows, generator)[0] for _ in range(n)])
    second_moment = completions.mT @ completions / n
    projection = torch.diag(torch.tensor([0.0] * k + [1.0] * (d - k), dtype=torch.float64))
    assert float((second_moment - projection / (d - k)).abs().max()) < 5.0 / (n * (d - k)) ** 0.5
