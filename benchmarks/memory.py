"""Memory probes of the benchmarks: peak and current memory on a CUDA device (allocator counters) or of the process
on the CPU (Linux ``/proc/self/status``), and the peak a call adds to what was held before it."""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity, profile

from gprf.cli.timing import synchronize


def _proc_status_bytes(field: str) -> int | None:
    """A ``kB`` field of ``/proc/self/status`` in bytes, or ``None`` off Linux."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_memory_bytes(device: torch.device) -> int:
    """Peak allocated memory on a CUDA ``device`` since the last :func:`reset_peak_memory`, else the
    process's peak resident set size (Linux ``VmHWM``, since the last reset; ``ru_maxrss`` elsewhere)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    peak = _proc_status_bytes("VmHWM")
    if peak is not None:
        return peak
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB elsewhere


def current_memory_bytes(device: torch.device) -> int | None:
    """Allocated memory on a CUDA ``device`` now, else the process's resident set size (``None`` off Linux)."""
    if device.type == "cuda":
        return torch.cuda.memory_allocated(device)
    return _proc_status_bytes("VmRSS")


def reset_peak_memory(device: torch.device) -> bool:
    """Start a new peak-memory window; ``False`` where the CPU's peak RSS cannot be reset (non-Linux)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return True
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")  # Linux >= 4.0: resets the peak RSS (VmHWM) to the current RSS
        return True
    except OSError:
        return False


@dataclass(frozen=True)
class MemoryProbe:
    """One call's memory: the peak (:func:`peak_memory_bytes`), that peak above what was held before the call
    (``None`` where the current memory cannot be read), and whether the peak window was reset for the call (``False``
    on non-Linux CPUs, where ``peak`` is the process's peak so far)."""

    peak: int
    extra: int | None
    windowed: bool


def probe_memory(fn: Callable[[], object], device: torch.device) -> MemoryProbe:
    """Call ``fn`` once (its result dropped at once) in a fresh peak-memory window and report its memory."""
    synchronize(device)
    baseline = current_memory_bytes(device)
    windowed = reset_peak_memory(device)
    fn()
    synchronize(device)
    peak = peak_memory_bytes(device)
    return MemoryProbe(peak, None if baseline is None else max(peak - baseline, 0), windowed)


def peak_extra_bytes(fn: Callable[[], object], device: torch.device) -> int | None:
    """What one call of ``fn`` adds at its peak to the memory held before it, or ``None`` where the peak cannot be
    reset (non-Linux CPUs)."""
    probe = probe_memory(fn, device)
    return probe.extra if probe.windowed else None


def available_memory_bytes(device: torch.device) -> int:
    """Free memory of the CUDA ``device``, else the machine's available physical memory."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def peak_extra_tensor_bytes(fn: Callable[[], object]) -> int:
    """The peak CPU tensor memory of one call of ``fn``, from the memory timeline of torch's profiler: what the call
    allocates, plus any earlier tensor the profiler sees it use (so an upper bound on what the call adds), without
    the allocator's cached or fragmented pages that make the process's resident set size a noisy measure (repeated
    calls of the same function differ by hundreds of megabytes there)."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        fn()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "memory.json")
        prof.export_memory_timeline(path, device="cpu")
        with open(path) as timeline:
            _, sizes = json.load(timeline)
    return max((sum(categories) for categories in sizes), default=0)
