"""Progress lines (stderr), plain-text tables and JSON output for the ``gprf`` subcommands."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO


class Progress:
    """One line per step on ``stream`` (stderr by default), prefixed with the elapsed time."""

    def __init__(self, name: str, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.name = name
        self.enabled = enabled
        self.stream = stream
        self.start = time.perf_counter()

    def __call__(self, message: str) -> None:
        if self.enabled:
            stream = self.stream if self.stream is not None else sys.stderr
            print(f"[{self.name} {time.perf_counter() - self.start:6.1f}s] {message}", file=stream, flush=True)


def format_number(value: float | None, digits: int = 4) -> str:
    """``digits`` significant digits (``-`` for a missing value)."""
    if value is None:
        return "-"
    return f"{value:.{digits}g}"


def format_seconds(value: float | None) -> str:
    """Seconds with three significant digits (``-`` when missing)."""
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:.0f}"
    return f"{value:.3g}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table: first column left-aligned, the others right-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"table row has {len(row)} cells, expected {len(headers)}: {row!r}")
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]

    def line(cells: Sequence[str]) -> str:
        parts = [cells[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def write_json(path: str | Path, payload: dict) -> None:
    """Write ``payload`` as indented JSON (NaN/inf become null so that strict parsers accept it)."""

    def clean(value):
        if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value

    Path(path).write_text(json.dumps(clean(payload), indent=2) + "\n")
