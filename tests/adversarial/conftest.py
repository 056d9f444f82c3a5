"""The adversarial suite: bad, extreme and inconsistent inputs to every public entry point of gprf, each asserting the
right value or the exact error type and a fragment of its message (one file per entry point, not per module).

Property-based tests run with :data:`tests.helpers.properties.PROPERTIES` (derandomised, no example database, no
deadline, few examples), so that the folder runs in about a minute on one core.
"""

from __future__ import annotations

import pytest
import torch.distributed as dist


@pytest.fixture
def group_of_one():
    """A gloo process group of this process alone (an in-memory store: nothing touches the file system)."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()
