"""benchmarks.memory: the peak a call adds is seen on the device it runs on (the process's RSS on Linux CPUs)."""

from __future__ import annotations

import sys

import pytest
import torch

from benchmarks.memory import (
    current_memory_bytes,
    peak_extra_bytes,
    peak_extra_tensor_bytes,
    peak_memory_bytes,
    reset_peak_memory,
)

MIB = 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the CPU peak is reset through Linux's /proc")
def test_a_temporary_allocation_shows_as_peak_extra_memory_on_the_cpu():
    # 256 MiB written (so resident), then freed: the peak above the baseline holds it, the current RSS need not.
    extra = peak_extra_bytes(lambda: torch.ones(32 * MIB, dtype=torch.float64).sum(), torch.device("cpu"))
    assert 240 * MIB <= extra <= 400 * MIB
    assert peak_extra_bytes(lambda: None, torch.device("cpu")) < 64 * MIB


def test_peak_is_at_least_the_current_memory(device):
    if device.type == "cuda":
        held = torch.ones(MIB, device=device)
    assert reset_peak_memory(device) or not sys.platform.startswith("linux")
    current = current_memory_bytes(device)
    assert current is None or peak_memory_bytes(device) >= current
    if device.type == "cuda":
        extra = peak_extra_bytes(lambda: torch.ones(16 * MIB, device=device).sum(), device)
        assert extra >= 64 * MIB and held.numel() == MIB


def test_the_cpu_tensor_peak_is_the_largest_live_set_of_the_call():
    def call():
        first = torch.ones(8 * MIB, dtype=torch.float64)  # 64 MiB
        second = torch.ones(4 * MIB, dtype=torch.float64)  # 32 MiB, both alive: 96 MiB
        del first, second
        return torch.ones(2 * MIB, dtype=torch.float64).sum()  # 16 MiB alone afterwards

    assert 96 * MIB <= peak_extra_tensor_bytes(call) <= 97 * MIB
