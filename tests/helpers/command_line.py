"""Helpers of the command-line tests (gprf's and the benchmarks'): a tiny ``compare`` configuration, readers of the
printed tables and of argparse errors, and a CSV writer."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from gprf.cli import main

TINY_COMPARE = ["compare", "--subsample", "80", "--max-train", "120", "--fit-iters", "5", "--features", "16", "--quiet"]


def options_without_help(parser: argparse.ArgumentParser) -> Iterator[str]:
    """``"<prog> <option>"`` for every argument of ``parser`` and of its subcommands (recursively) with no help text.

    argparse offers no public listing of a parser's arguments; its ``_actions`` are what ``format_help`` reads.
    """
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                yield from options_without_help(subparser)
        elif not (action.help and action.help.strip()):
            yield f"{parser.prog} {'/'.join(action.option_strings) or action.dest}"


def table_rows(text: str) -> dict[str, list[str]]:
    """Rows of the first table in ``text`` (between the dashed rule and the next blank line), by first cell."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("---"))
    rows = {}
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        cells = line.split()
        rows[cells[0]] = cells[1:]
    return rows


def write_csv(path, num_rows: int = 60, seed: int = 0) -> None:
    """A CSV of three numeric inputs, a text column and a target ``y``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_rows, 3))
    y = np.sin(x[:, 0]) + 0.5 * x[:, 1] + 0.1 * rng.normal(size=num_rows)
    lines = ["a,b,c,label,y"] + [f"{r[0]},{r[1]},{r[2]},row{i},{t}" for i, (r, t) in enumerate(zip(x, y, strict=True))]
    path.write_text("\n".join(lines) + "\n")


def cli_error(capsys, argv: list[str], entry: Callable[[list[str]], int] = main, prog: str | None = None) -> str:
    """The message of the argparse error that ``entry(argv)`` exits with: status 2, no traceback, and the message on
    the one ``<prog>: error:`` line that ends stderr (``prog``: ``python -m gprf <command>`` by default)."""
    with pytest.raises(SystemExit) as exit_info:
        entry(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.rstrip("\n").splitlines()[-1]
    prog = f"{prog or f'python -m gprf {argv[0]}'}: error: "
    assert last.startswith(prog), err
    return last.removeprefix(prog)
