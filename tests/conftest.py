"""The suite's pytest configuration: the shipped fixtures, GPyTorch's ``log_prob`` setting per test, the slow marker.

The fixtures ``device``, ``dtype``, ``float64``, ``generator`` and ``single_thread`` come from the shipped kit
(:mod:`gprf.testing.fixtures`, loaded below as a plugin), as they do for code that extends gprf.
"""

from __future__ import annotations

from pathlib import Path

import gpytorch
import pytest

pytest_plugins = ["gprf.testing.fixtures"]

SLOW_TESTS_FILE = Path(__file__).with_name("slow_tests.txt")


def read_slow_tests(path: Path = SLOW_TESTS_FILE) -> list[str]:
    """The node ids listed in ``slow_tests.txt``: one a line, ``#`` comments and blank lines skipped."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def is_listed(nodeid: str, listed: str) -> bool:
    """Whether ``listed`` names the test ``nodeid``: itself, any of its parametrizations, or its module or class."""
    return nodeid == listed or nodeid.startswith((listed + "[", listed + "::"))


@pytest.hookimpl(tryfirst=True)  # before pytest's own hook deselects by ``-m``
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` the tests ``slow_tests.txt`` lists, so ``-m "not slow"`` runs the fast part of the suite.

    The list lives in one data file rather than in decorators across the test modules: it is regenerated from a full
    run's ``--durations=0`` as timings move, without touching the tests themselves.
    """
    listed = read_slow_tests()
    for item in items:
        if any(is_listed(item.nodeid, entry) for entry in listed):
            item.add_marker(pytest.mark.slow)


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
