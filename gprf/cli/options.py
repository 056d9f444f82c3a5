"""Argument types and validation of ``python -m gprf compare``, shared with the repository's benchmarks."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import torch

T = TypeVar("T", int, float)

DTYPES = {"float64": torch.float64, "float32": torch.float32}


class CLIError(ValueError):
    """Bad user input found after parsing (e.g. a missing CSV column); reported as an argparse error."""


def _checked_number(parse: Callable[[str], T], is_valid: Callable[[T], bool], expected: str) -> Callable[[str], T]:
    """An argparse type that parses ``text`` and rejects values outside the valid set."""

    def convert(text: str) -> T:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not is_valid(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return convert


positive_int = _checked_number(int, lambda value: value >= 1, "a positive integer")
non_negative_int = _checked_number(int, lambda value: value >= 0, "a non-negative integer")
positive_float = _checked_number(float, lambda value: 0 < value < float("inf"), "a positive number")
fraction = _checked_number(float, lambda value: 0.0 < value < 1.0, "a number strictly between 0 and 1")


def add_device_arguments(parser: argparse.ArgumentParser) -> None:
    """``--device``, ``--dtype`` and ``--threads``, common to every subcommand."""
    parser.add_argument("--device", default="cpu", help="torch device: cpu, cuda or cuda:N (default: cpu)")
    parser.add_argument("--dtype", default="float64", choices=sorted(DTYPES), help="model dtype (default: float64)")
    parser.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        metavar="T",
        help="torch CPU threads (default: torch's choice; on a busy shared machine --threads 1 can be much faster)",
    )


def resolve_device(name: str) -> torch.device:
    """A usable ``torch.device`` or a :class:`CLIError` saying why not."""
    try:
        device = torch.device(name)
    except RuntimeError:
        raise CLIError(f"argument --device: unknown device {name!r}; use cpu, cuda or cuda:N") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise CLIError("argument --device: CUDA is not available on this machine; use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise CLIError(
                f"argument --device: {name} does not exist ({torch.cuda.device_count()} CUDA device(s) visible)"
            )
    elif device.type != "cpu":
        raise CLIError(f"argument --device: unsupported device {name!r}; use cpu, cuda or cuda:N")
    return device


def check_output_path(path: str | None, option: str) -> None:
    """Fail before a long run if ``path`` cannot be written (its folder must exist)."""
    if path is None:
        return
    target = Path(path)
    if target.is_dir():
        raise CLIError(f"argument {option}: {path!r} is a directory; give a file name")
    if not target.parent.is_dir():
        raise CLIError(f"argument {option}: folder {str(target.parent)!r} does not exist")


def require_matplotlib(option: str) -> None:
    """Fail before a long run if ``option`` (a plot file) cannot be drawn because matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise CLIError(f"argument {option}: needs matplotlib (pip install matplotlib)") from None


def apply_threads(threads: int | None) -> None:
    """Set torch's intra-op thread count when asked."""
    if threads is not None:
        torch.set_num_threads(threads)
