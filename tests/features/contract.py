"""Checks of the feature-map contract shared by the tests of every feature family, and the readers the generic
contract tests in tests/features/test_base.py use for maps of any kind (one root or two, composite maps)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from gprf.features import FeatureMap, FeatureMapBase, SignedFeatureMap


def random_buffers(feature_map: FeatureMap) -> dict[str, torch.Tensor]:
    """The map's own random draws, by buffer name."""
    return {name: getattr(feature_map, name) for name in feature_map._random_buffer_names}


def all_draws(feature_map: FeatureMapBase) -> dict[str, torch.Tensor]:
    """Every random draw of the map and of the maps inside it (e.g. a Maclaurin map's sketches), by qualified name."""
    draws = {}
    for prefix, module in feature_map.named_modules():
        if isinstance(module, FeatureMapBase):
            for name in module._random_buffer_names:
                draws[f"{prefix}.{name}" if prefix else name] = getattr(module, name)
    return draws


def real_roots(feature_map: FeatureMapBase, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The real roots of the map at ``x``: ``(R,)`` for a FeatureMap, ``(A, B)`` for a SignedFeatureMap."""
    if isinstance(feature_map, SignedFeatureMap):
        return tuple(feature_map(x))
    return (feature_map.real_features(x),)


def kernel_estimate(feature_map: FeatureMapBase, x: torch.Tensor) -> torch.Tensor:
    r"""The map's kernel matrix at ``x``: :math:`\mathrm{Re}\,\Phi\Phi^H` or :math:`AA^\top - BB^\top`."""
    if isinstance(feature_map, SignedFeatureMap):
        a, b = feature_map(x)
        return a @ a.mT - b @ b.mT
    phi = feature_map(x)
    return (phi @ phi.conj().mT).real


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
    return build_in(torch.float64, factory, *args, **kwargs)


def build_in(dtype: torch.dtype, factory: Callable[..., FeatureMapBase], *args, **kwargs) -> FeatureMapBase:
    """``factory(*args, **kwargs)`` with ``dtype`` as torch's default dtype, restored afterwards."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        return factory(*args, **kwargs)
    finally:
        torch.set_default_dtype(previous)
