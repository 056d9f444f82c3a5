"""Checks of the FeatureMap contract shared by the tests of every feature family."""

from __future__ import annotations

from collections.abc import Callable

import torch

from gprf.features import FeatureMap


def random_buffers(feature_map: FeatureMap) -> dict[str, torch.Tensor]:
    """The map's random draws, by buffer name."""
    return {name: getattr(feature_map, name) for name in feature_map._random_buffer_names}


def check_resample_contract(build: Callable[..., FeatureMap], x: torch.Tensor) -> torch.Tensor:
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


def build_in_float64(factory: Callable[..., FeatureMap], *args, **kwargs) -> FeatureMap:
    """``factory(*args, **kwargs)`` with float64 draws: feature maps create their buffers in the default dtype."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return factory(*args, **kwargs)
    finally:
        torch.set_default_dtype(previous)
