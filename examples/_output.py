"""Where the example scripts write: ``--out DIR`` (one folder for everything) and ``--plot`` (draw the figures there).

Each example imports this module from its own folder (a script's folder is first on ``sys.path``). The default
folder is ``./<example>_output`` in the current directory; it is announced on stdout before the run starts and is
refused when the current directory lies inside the gprf package or the documentation, whose files belong to the
repository. An explicit ``--out`` may point anywhere: ``--out docs/_static --plot`` regenerates a docs figure.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import gprf
from gprf.cli.options import CLIError, require_matplotlib

#: Folders a default output folder must not fall into: the package's source and the documentation.
PROTECTED_FOLDERS = (Path(gprf.__file__).resolve().parent, Path(__file__).resolve().parents[1] / "docs")


def add_output_arguments(parser: argparse.ArgumentParser, example: str, tables: str | None = None) -> None:
    """``--out DIR`` and ``--plot``; ``tables`` names what the example writes to ``--out`` without ``--plot``."""
    written = f"{tables} and, with --plot, {example}.png" if tables else f"{example}.png (with --plot)"
    parser.add_argument(
        "--out",
        "--output",
        dest="output",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"folder for {written}; created if needed (default: ./{example}_output)",
    )
    parser.add_argument("--plot", action="store_true", help=f"draw the figure into --out as {example}.png")


def output_folder(parser: argparse.ArgumentParser, args: argparse.Namespace, example: str) -> Path:
    """The folder to write to, created and announced on stdout; a parser error before any long run when the folder
    cannot be used (a file of that name, matplotlib missing for ``--plot``, a default inside the package or docs)."""
    if args.plot:
        try:
            require_matplotlib("--plot")
        except CLIError as error:
            parser.error(str(error))
    folder = args.output
    if folder is None:
        folder = Path(f"{example}_output")
        here = Path.cwd().resolve()
        inside = [protected for protected in PROTECTED_FOLDERS if protected in (here, *here.parents)]
        if inside:
            parser.error(
                f"the default output folder ./{folder} would be inside {inside[0]}; "
                "run from another directory or pass --out DIR"
            )
    if folder.exists() and not folder.is_dir():
        parser.error(f"argument --out: {str(folder)!r} exists and is not a folder")
    default = " (the default; choose the folder with --out DIR)" if args.output is None else ""
    print(f"writing to {folder}{default}", flush=True)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_outputs(
    folder: Path,
    example: str,
    *,
    table: str | None = None,
    draw: Callable[[Path], None] | None = None,
    started: float | None = None,
) -> list[Path]:
    """Write ``table`` to ``<example>.md`` and, when ``draw`` is given (``--plot``), call it with the path
    ``<example>.png``; print the files written (and the seconds since ``started``, a ``time.perf_counter()``)."""
    written = []
    if table is not None:
        written.append(folder / f"{example}.md")
        written[-1].write_text(table + "\n", encoding="utf-8")
    if draw is not None:
        written.append(folder / f"{example}.png")
        draw(written[-1])
    elapsed = "" if started is None else f" in {time.perf_counter() - started:.1f} s"
    print(f"wrote {' and '.join(map(str, written))}{elapsed}", flush=True)
    return written
