"""Argument parsing and dispatch of ``python -m gprf <command>`` and of the ``gprf`` console script."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import torch

from gprf import __version__
from gprf.cli import compare
from gprf.cli.options import CLIError

PROG = "python -m gprf"

#: What ``bench`` says since the benchmarks left the installed package.
BENCH_MOVED = (
    "the benchmarks are not part of the installed package; run them from the root of the gprf repository with "
    "'python -m benchmarks [options]' (the same options as before; see the README)"
)


def _add_moved_bench_parser(subparsers: argparse._SubParsersAction) -> None:
    # No option prefix: every argument after "bench" (options and --help included) is taken as given, so any
    # earlier bench command line gets the pointer rather than an "unrecognized arguments" error.
    parser = subparsers.add_parser(
        "bench", help="moved: run 'python -m benchmarks' from the repository", add_help=False, prefix_chars="\0"
    )
    parser.add_argument("former_arguments", nargs="*", help="ignored: any arguments of the former bench command")
    parser.set_defaults(run=_bench_moved, error=parser.error, prog=parser.prog)


def _bench_moved(args: argparse.Namespace) -> int:
    print(f"{args.prog}: {BENCH_MOVED}", file=sys.stderr)
    return 2


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="gprf: random-feature kernel approximations for GPyTorch. "
        f"Run '{prog} <command> --help' for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"gprf {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    compare.add_parser(subparsers)
    _add_moved_bench_parser(subparsers)
    return parser


def run_command(parser: argparse.ArgumentParser, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` with ``parser`` and call the ``run`` its defaults set; returns the exit status.

    A :class:`CLIError` found after parsing becomes the parser's ``error`` (set in the defaults too): usage line,
    message, exit status 2. The number of torch threads is restored afterwards, so ``--threads`` does not leak into
    an in-process caller.
    """
    args = parser.parse_args(argv)
    threads = torch.get_num_threads()
    try:
        return args.run(args)
    except CLIError as err:
        args.error(str(err))
    finally:
        torch.set_num_threads(threads)
    return 2  # unreachable: error() exits


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """Entry point; returns the exit status. Bad input exits with status 2 and an argparse error on stderr."""
    return run_command(build_parser(prog), argv)


def console_script() -> int:
    """The ``gprf`` command installed with the package (the same as ``python -m gprf``)."""
    return main(prog="gprf")
