"""The suite's pytest configuration: the shipped fixtures, and GPyTorch's ``log_prob`` setting per test.

The fixtures ``device``, ``dtype``, ``float64``, ``generator`` and ``single_thread`` come from the shipped kit
(:mod:`gprf.testing.fixtures`, loaded below as a plugin), as they do for code that extends gprf.
"""

from __future__ import annotations

import gpytorch
import pytest

pytest_plugins = ["gprf.testing.fixtures"]


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
