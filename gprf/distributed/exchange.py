r"""The one place gprf talks to ``torch.distributed``: named, checked and counted collectives over a process group.

Every sharded step of gprf starts with a *header*: a fixed-size vector of :data:`HEADER_SIZE` numbers that every
rank all-gathers, holding the step's name (its index in :data:`STEPS`), whether this rank's local part of the step
failed, the layout the ranks must agree on (the number of numbers about to be summed, the number of features, the
dtype, the device type, ...) and a few numbers of each rank's own (its row count, its clock). Because the header's
size never changes, it is safe whatever the ranks disagree on; the variable-size collective that follows it is only
made once every rank has checked that all of them are at the same step with the same layout. This matters: a gloo
collective whose sizes differ between ranks aborts the processes, an NCCL one hangs.

So instead of a hang, an abort or a silently wrong sum, every rank raises the same error:

* ranks at different steps (one skipped a backward pass, or failed alone before a step) or with different layouts:
  :class:`~gprf.exceptions.ShardMismatchError` naming the ranks and what differs;
* a local failure on some rank (an exception while computing its part): that exception on every rank (the others
  receive a copy, with a note naming the rank it came from), so that every rank takes the same ``except`` branch;
* a collective that does not complete (a rank stopped or died, or the process group's timeout passed):
  :class:`~gprf.exceptions.CollectiveError` naming this rank and the step.

Every number handed to a collective is counted per step (:class:`CommunicationLog`), which is how the benchmarks
check the communicated bytes against their formula.
"""

from __future__ import annotations

import math
import pickle
import time
from collections import defaultdict
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist
from torch import Tensor

from gprf.exceptions import CollectiveError, ShardMismatchError

#: The steps of gprf's sharded computations, in the order of their codes in the header.
STEPS = (
    "marginal likelihood",
    "marginal likelihood gradient",
    "row counts",
    "fit clock",
    "fit cost estimate",
    "scale refit",
    "posterior statistics",
    "sample paths",
    "Thompson batch",
    "model state",
)
#: Numbers in every header (the step's code, the failure flag, then the agreed and the own numbers of the step).
HEADER_SIZE = 16
_FIXED_FIELDS = 2
#: Codes of the dtypes and device types in a header (anything else gets the code after the last).
_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128)
_DEVICE_TYPES = ("cpu", "cuda", "xpu", "mps", "hpu", "meta")


def dtype_code(dtype: torch.dtype) -> int:
    """The header code of a dtype (:func:`describe_field` turns it back into the name)."""
    return _DTYPES.index(dtype) if dtype in _DTYPES else len(_DTYPES)


def device_code(device: torch.device) -> int:
    """The header code of a device's type (the index of the device does not matter to the sums)."""
    return _DEVICE_TYPES.index(device.type) if device.type in _DEVICE_TYPES else len(_DEVICE_TYPES)


def describe_field(name: str, value: float) -> str:
    """A header value as a user reads it: dtype and device codes by name, counts as integers."""
    if math.isnan(value):
        return "unknown"
    code = int(value)
    if name.endswith("dtype"):
        return str(_DTYPES[code]) if code < len(_DTYPES) else "another dtype"
    if name.endswith("device type"):
        return _DEVICE_TYPES[code] if code < len(_DEVICE_TYPES) else "another device type"
    return str(code) if code == value else f"{value:g}"


def _step_name(code: float) -> str:
    index = int(code) if math.isfinite(code) else -1
    return f"'{STEPS[index]}'" if 0 <= index < len(STEPS) and index == code else f"an unknown step (code {code:g})"


def _with_note(error: BaseException, note: str) -> BaseException:
    """``error`` with ``note`` added to what it prints (``add_note`` where Python has it, else its message)."""
    if hasattr(error, "add_note"):
        error.add_note(note)
    elif error.args and isinstance(error.args[0], str):
        error.args = (f"{error.args[0]}\n{note}", *error.args[1:])
    return error


def _supported_device_types(group: dist.ProcessGroup | None) -> set[str]:
    """Device types the group's backend runs collectives on (``"cpu:gloo,cuda:nccl"`` gives ``{"cpu", "cuda"}``)."""
    config = dist.get_backend_config(group) if hasattr(dist, "get_backend_config") else dist.get_backend(group)
    types = {entry.split(":")[0] for entry in config.split(",") if ":" in entry}
    if types:
        return types
    return set(dist.Backend.backend_capability.get(config.lower(), ["cpu"]))


class CommunicationLog:
    """What a :class:`ShardExchange` handed to collectives: calls, numbers and bytes per step (each rank's own
    contribution: the tensor it all-reduces, or its share of an all-gather), and the wall time spent in them (the
    transfer and any wait for slower ranks)."""

    def __init__(self) -> None:
        self._calls: dict[str, int] = defaultdict(int)
        self._numbers: dict[str, int] = defaultdict(int)
        self._bytes: dict[str, int] = defaultdict(int)
        self._seconds: dict[str, float] = defaultdict(float)

    def record(self, step: str, tensor: Tensor, seconds: float = 0.0) -> None:
        self._calls[step] += 1
        self._numbers[step] += tensor.numel()
        self._bytes[step] += tensor.numel() * tensor.element_size()
        self._seconds[step] += seconds

    def calls(self, step: str | None = None) -> int:
        """Collectives made (of ``step``, or of all steps)."""
        return self._total(self._calls, step)

    def numbers(self, step: str | None = None) -> int:
        """Numbers handed to collectives (of ``step``, or of all steps)."""
        return self._total(self._numbers, step)

    def bytes(self, step: str | None = None) -> int:
        """Bytes handed to collectives (of ``step``, or of all steps)."""
        return self._total(self._bytes, step)

    def seconds(self, step: str | None = None) -> float:
        """Wall time in collectives (of ``step``, or of all steps), waits for other ranks included."""
        return self._total(self._seconds, step)

    def steps(self) -> list[str]:
        """The steps that made collectives so far."""
        return list(self._calls)

    def reset(self) -> None:
        for counts in (self._calls, self._numbers, self._bytes, self._seconds):
            counts.clear()

    @staticmethod
    def _total(counts: dict[str, float], step: str | None) -> float:
        return sum(counts.values()) if step is None else counts.get(step, 0)


class ShardExchange:
    """Checked collectives of gprf's sharded steps over ``group`` (default: the world), see the module docstring.

    Raises ``RuntimeError`` when ``torch.distributed`` is not initialised (call ``init_process_group`` first).
    """

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError(
                "torch.distributed is not initialised: call torch.distributed.init_process_group(...) on every rank "
                "(torchrun sets up what it needs) before building gprf's sharded objects."
            )
        self.group = group
        self.rank = dist.get_rank(group)
        self.world_size = dist.get_world_size(group)
        self._device_types = _supported_device_types(group)
        # One device for the headers on every rank (whatever device each rank's model is on), so that they can
        # always be compared: the CPU where the backend has it (gloo), else the current CUDA device (NCCL).
        self.header_device = self._device_for("cpu")
        self.log = CommunicationLog()

    def _device_for(self, device_type: str) -> torch.device:
        if device_type in self._device_types and device_type != "cuda":
            return torch.device(device_type)
        if "cuda" in self._device_types and (device_type == "cuda" or "cpu" not in self._device_types):
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def payload_device(self, device: torch.device) -> torch.device:
        """Where a sum of tensors on ``device`` is made: that device where the backend supports it, else the CPU
        (or the current CUDA device for a CUDA-only backend)."""
        if device.type in self._device_types:
            return device
        return self._device_for(device.type)

    # ------------------------------------------------------------------ collectives
    def _collective(self, step: str, tensor: Tensor, call: Callable[[], object]) -> None:
        """Run ``call``, the collective of ``tensor``, recorded in :attr:`log` under ``step``."""
        begin = time.perf_counter()
        self._call(step, call)
        self.log.record(step, tensor, time.perf_counter() - begin)

    def _call(self, step: str, call: Callable[[], object]) -> None:
        """Run the collective ``call``; a failure is a :class:`~gprf.exceptions.CollectiveError` naming the step."""
        try:
            call()
        except RuntimeError as error:  # gloo and NCCL report timeouts and lost peers as RuntimeError
            message = str(error).strip().splitlines()
            raise CollectiveError(
                f"Rank {self.rank} of {self.world_size}: the collective of the step '{step}' did not complete"
                f" ({message[0] if message else type(error).__name__}). Another rank stopped before this "
                "step (it failed, or took another branch) or took longer than the process group's timeout "
                "(init_process_group(timeout=...)); the process group cannot be used any more."
            ) from error

    def all_reduce(self, step: str, tensor: Tensor) -> Tensor:
        """The sum of ``tensor`` over the ranks (a new tensor on ``tensor``'s device); call it on every rank with
        the same shape, after a :meth:`agree` that checked it."""
        summed = tensor.detach().to(self.payload_device(tensor.device), copy=True)
        self._collective(step, summed, lambda: dist.all_reduce(summed, op=dist.ReduceOp.SUM, group=self.group))
        return summed.to(tensor.device)

    def all_gather(self, step: str, tensor: Tensor) -> Tensor:
        """Every rank's ``tensor`` stacked, ``(world_size, *tensor.shape)`` on ``tensor``'s device; call it on every
        rank with the same shape, after a :meth:`agree` that checked it."""
        local = tensor.detach().to(self.payload_device(tensor.device))
        parts = [torch.empty_like(local) for _ in range(self.world_size)]
        self._collective(step, local, lambda: dist.all_gather(parts, local, group=self.group))
        return torch.stack(parts).to(tensor.device)

    def broadcast(self, step: str, tensor: Tensor) -> Tensor:
        """Rank 0's ``tensor`` on every rank (a new tensor on ``tensor``'s device); call it on every rank with the
        same shape and dtype, after a :meth:`agree` that checked them."""
        shared = tensor.detach().to(self.payload_device(tensor.device), copy=True)
        source = dist.get_global_rank(self.group, 0) if self.group is not None else 0
        self._collective(step, shared, lambda: dist.broadcast(shared, src=source, group=self.group))
        return shared.to(tensor.device)

    # ------------------------------------------------------------------ the header
    def agree(
        self,
        step: str,
        agreed: Sequence[tuple[str, float]] = (),
        own: Sequence[float] = (),
        failure: BaseException | None = None,
    ) -> Tensor:
        """All-gather this rank's header for ``step`` and check every rank's: same step, no failure, the same
        ``agreed`` values (``(name, value)`` pairs: the name appears in the error). Returns every rank's ``own``
        numbers, ``(world_size, len(own))`` float64 on the CPU.

        ``failure``: the exception this rank's local part of the step raised (then ``agreed`` and ``own`` may be
        empty). Every rank then raises it (see the module docstring).
        """
        step_code = STEPS.index(step)
        if failure is not None:
            agreed, own = (), ()
        values = [step_code, float(failure is not None), *(value for _, value in agreed), *own]
        if len(values) > HEADER_SIZE:
            raise ValueError(f"A header holds {HEADER_SIZE} numbers; the step '{step}' needs {len(values)}.")
        header = torch.full((HEADER_SIZE,), math.nan, dtype=torch.float64)
        header[: len(values)] = torch.tensor(values, dtype=torch.float64)
        gathered = self.all_gather(step, header.to(self.header_device)).cpu()
        self._check_steps(gathered, step_code)
        if bool(gathered[:, 1].any()):
            self._raise_failure(gathered, step, failure)
        self._check_agreed(gathered, step, agreed)
        start = _FIXED_FIELDS + len(agreed)
        return gathered[:, start : start + len(own)]

    def _check_steps(self, gathered: Tensor, step_code: int) -> None:
        codes = gathered[:, 0].tolist()
        if all(code == step_code for code in codes):
            return
        where = ", ".join(f"rank {rank} at {_step_name(code)}" for rank, code in enumerate(codes))
        raise ShardMismatchError(
            f"The ranks reached different steps of a sharded computation ({where}). Every rank must make the same "
            "calls in the same order: a rank that skipped one (e.g. a backward pass, or a step after an error only it "
            "saw) desynchronises them."
        )

    def _raise_failure(self, gathered: Tensor, step: str, failure: BaseException | None) -> None:
        """Every rank raises: the failing ranks their own exception, the others a copy of the first one's."""
        shared = None
        if failure is not None:
            try:
                shared = pickle.loads(pickle.dumps(failure))
            except Exception:  # an exception that does not pickle travels as its text
                shared = RuntimeError(f"{type(failure).__name__}: {failure}")
        received: list[BaseException | None] = [None] * self.world_size
        self._call(step, lambda: dist.all_gather_object(received, shared, group=self.group))
        if failure is not None:
            raise failure
        rank = int(gathered[:, 1].nonzero()[0, 0])
        error = received[rank] or RuntimeError(f"rank {rank} failed")
        raise _with_note(error, f"Raised on rank {rank} in the step '{step}'; rank {self.rank} stops with it.")

    def _check_agreed(self, gathered: Tensor, step: str, agreed: Sequence[tuple[str, float]]) -> None:
        differences = []
        for index, (name, _) in enumerate(agreed):
            column = gathered[:, _FIXED_FIELDS + index].tolist()
            for rank, value in enumerate(column[1:], start=1):
                if value != column[0]:
                    differences.append(
                        f"{name} is {describe_field(name, value)} on rank {rank} but "
                        f"{describe_field(name, column[0])} on rank 0"
                    )
        if differences:
            raise ShardMismatchError(
                f"The ranks disagree in the step '{step}': {'; '.join(differences)}. Build the model identically on "
                "every rank (the same class, constructor arguments and seed, dtype and device type), or load one "
                "state_dict on every rank."
            )
