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

``concrete_exported_classes`` lists the classes a contract test must cover (see tests/features/test_base.py and
tests/kernels/test_feature_kernel.py).
"""

from __future__ import annotations

from types import ModuleType

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


def is_abstract(cls: type) -> bool:
    """Whether ``cls`` leaves an abstract method unimplemented.

    ``inspect.isabstract`` only sees classes built by ``ABCMeta``; GPyTorch's ``Kernel`` is not, so gprf's kernel
    bases mark their abstract methods without Python enforcing them.
    """
    return any(getattr(getattr(cls, name, None), "__isabstractmethod__", False) for name in dir(cls))


def concrete_exported_classes(module: ModuleType, bases: tuple[type, ...]) -> list[type]:
    """The concrete subclasses of ``bases`` that ``module`` exports in ``__all__``, sorted by name.

    Raises ``AssertionError`` when a concrete subclass defined in gprf is not exported: a contract that enumerates the
    exports must not miss it.
    """
    exported = [getattr(module, name) for name in module.__all__]
    concrete = {cls for cls in exported if isinstance(cls, type) and issubclass(cls, bases) and not is_abstract(cls)}
    defined, pending = set(), list(bases)
    while pending:
        for subclass in pending.pop().__subclasses__():
            if subclass not in defined and subclass.__module__.startswith("gprf."):
                defined.add(subclass)
                pending.append(subclass)
    hidden = {cls.__name__ for cls in defined if not is_abstract(cls)} - {cls.__name__ for cls in concrete}
    assert not hidden, f"concrete classes not exported from {module.__name__}: {sorted(hidden)}"
    return sorted(concrete, key=lambda cls: cls.__name__)
