"""Pytest fixtures and parameter lists for tests of gprf and of code that extends it.

Load the fixtures in a ``conftest.py``::

    pytest_plugins = ["gprf.testing.fixtures"]

* ``device``: a test over ``"cpu"`` and ``"cuda"``; the CUDA case is skipped (not silently dropped) where
  ``torch.cuda.is_available()`` is False.
* ``dtype``: a test over ``torch.float32`` and ``torch.float64``.
* ``float64``: runs a test with float64 as torch's default dtype and restores the previous default afterwards. Feature
  maps create their random buffers in the default dtype, so statistical tests build their maps inside this fixture to
  keep the draws in full precision (:func:`~gprf.testing.default_dtype` does the same in a ``with`` block).
* ``generator``: a freshly seeded CPU ``torch.Generator`` (tests never need to touch the global RNG).
* ``single_thread``: runs a test with one intra-op CPU thread (restored afterwards). Monte-Carlo tests that build
  thousands of tiny tensors are dominated by per-op overhead; on a small shared machine a second OpenMP thread that
  gets descheduled makes such ops 10-50x slower. Opt in per module with
  ``pytestmark = pytest.mark.usefixtures("single_thread")``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch

#: The seed of the kit's draws; two feature maps (or kernels) built with it in two places hold the same draws.
SEED = 1234

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")

#: ``pytest.mark.parametrize`` values of the ``device`` fixture.
DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]
#: ``pytest.mark.parametrize`` values of the ``dtype`` fixture.
DTYPES = [pytest.param(torch.float32, id="float32"), pytest.param(torch.float64, id="float64")]


@contextmanager
def default_dtype(dtype: torch.dtype) -> Iterator[torch.dtype]:
    """``dtype`` as torch's default dtype inside the block, the previous default restored afterwards."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield dtype
    finally:
        torch.set_default_dtype(previous)


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    return torch.device(request.param)


@pytest.fixture(params=DTYPES)
def dtype(request: pytest.FixtureRequest) -> torch.dtype:
    return request.param


@pytest.fixture
def float64() -> Iterator[torch.dtype]:
    with default_dtype(torch.float64) as dtype:
        yield dtype


@pytest.fixture
def generator() -> torch.Generator:
    return torch.Generator().manual_seed(20240607)


@pytest.fixture
def single_thread() -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
