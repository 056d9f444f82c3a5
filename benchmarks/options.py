"""Argument types of the benchmarks beyond those they share with ``python -m gprf compare``
(:mod:`gprf.cli.options`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def subset_of(choices: tuple[str, ...], kind: str) -> Callable[[str], list[str]]:
    """argparse type of a comma-separated subset of ``choices`` (duplicates dropped, in the order of ``choices``);
    an unknown or empty list is an error naming the ``kind`` of the names and the choices."""

    def parse(text: str) -> list[str]:
        names = list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))
        unknown = [name for name in names if name not in choices]
        if not names or unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {kind}(s) {', '.join(map(repr, unknown)) or 'none given'}; "
                f"choose from {', '.join(choices)} (comma-separated)"
            )
        return [name for name in choices if name in names]

    return parse
