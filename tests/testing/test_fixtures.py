"""gprf.testing.fixtures: the shipped fixtures (loaded by the suite's conftest as a plugin) and default_dtype."""

from __future__ import annotations

import pytest
import torch

from gprf.testing import DEVICES, DTYPES, SEED, default_dtype


def test_default_dtype_sets_and_restores_even_on_error():
    previous = torch.get_default_dtype()
    with default_dtype(torch.float64) as dtype:
        assert dtype is torch.float64 and torch.get_default_dtype() is torch.float64
        assert torch.zeros(1).dtype is torch.float64
    assert torch.get_default_dtype() is previous
    with pytest.raises(RuntimeError, match="inside"), default_dtype(torch.float64):
        raise RuntimeError("inside")
    assert torch.get_default_dtype() is previous


def test_float64_fixture_sets_the_default_dtype(float64):
    assert float64 is torch.float64 and torch.get_default_dtype() is torch.float64


def test_generator_fixture_is_freshly_seeded(generator):
    expected = torch.rand(3, generator=torch.Generator().manual_seed(20240607))
    assert torch.equal(torch.rand(3, generator=generator), expected)


def test_single_thread_fixture(single_thread):
    assert torch.get_num_threads() == 1


def test_parameter_lists():
    assert DEVICES[0] == "cpu" and DEVICES[1].values == ("cuda",)
    skip = DEVICES[1].marks[0]
    assert skip.name == "skipif" and skip.args == (not torch.cuda.is_available(),)
    assert [param.values for param in DTYPES] == [(torch.float32,), (torch.float64,)]
    assert SEED == 1234


def test_device_and_dtype_fixtures_cover_every_case(request, device, dtype):
    # Each test using them runs once per device (CUDA skipped without a GPU) and per floating dtype.
    assert device.type in {"cpu", "cuda"} and dtype in (torch.float32, torch.float64)
    assert request.node.callspec.id.split("-")[0] in {"cpu", "cuda"}
