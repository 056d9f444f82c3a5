"""Argument parsing and dispatch of ``python -m gprf <command>``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import torch

from gprf import __version__
from gprf.cli import bench, compare
from gprf.cli.options import CLIError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m gprf",
        description="gprf: random-feature kernel approximations for GPyTorch. "
        "Run 'python -m gprf <command> --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"gprf {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    compare.add_parser(subparsers)
    bench.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status. Bad input exits with status 2 and an argparse error on stderr."""
    parser = build_parser()
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    try:
        return args.run(args)
    except CLIError as err:
        args.error(str(err))  # the subcommand parser's error(): usage line, message, exit status 2
    finally:
        torch.set_num_threads(threads)  # --threads must not leak into an in-process caller
    return 2  # unreachable: error() exits
