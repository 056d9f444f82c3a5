"""Shared pytest fixtures for the gprf test suite.

* ``device``: parametrizes a test over ``"cpu"`` and ``"cuda"``; the CUDA case is skipped (not
  silently dropped) when ``torch.cuda.is_available()`` is False.
* ``dtype``: parametrizes a test over ``torch.float32`` and ``torch.float64``.
* ``float64``: runs a test with float64 as torch's default dtype and restores the previous default
  afterwards. Feature maps create their random buffers in the default dtype, so statistical tests
  build their maps inside this fixture to keep the draws in full precision.
* ``generator``: a freshly seeded CPU ``torch.Generator`` (tests never touch the global RNG).
* ``single_thread``: runs a test with one intra-op CPU thread (restored afterwards). Monte-Carlo tests
  that build thousands of tiny tensors (e.g. one scrambled Sobol engine per batch member) are
  dominated by per-op overhead; on a small shared machine a second OpenMP thread that gets
  descheduled makes such ops 10-50x slower. Opt in per module with
  ``pytestmark = pytest.mark.usefixtures("single_thread")``.
"""

from __future__ import annotations

import gpytorch
import pytest
import torch

requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")

DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]
DTYPES = [pytest.param(torch.float32, id="float32"), pytest.param(torch.float64, id="float64")]


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    return torch.device(request.param)


@pytest.fixture(params=DTYPES)
def dtype(request: pytest.FixtureRequest) -> torch.dtype:
    return request.param


@pytest.fixture
def float64():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield torch.float64
    finally:
        torch.set_default_dtype(previous)


@pytest.fixture
def generator() -> torch.Generator:
    return torch.Generator().manual_seed(20240607)


@pytest.fixture
def single_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@pytest.fixture(autouse=True)
def gpytorch_log_prob_default(request: pytest.FixtureRequest):
    """Run each test under the ``log_prob`` setting its user has.

    Collecting the BoTorch tests imports BoTorch, which switches linear_operator's fast ``log_prob`` off for the
    whole process. A GPyTorch user who never imports BoTorch has it on (GPyTorch's default), so tests not marked
    ``botorch`` run with it on; ``botorch`` tests keep BoTorch's setting, as a BoTorch user's process has it.
    """
    if request.node.get_closest_marker("botorch") is not None:
        yield
        return
    with gpytorch.settings.fast_computations.log_prob(True):
        yield
