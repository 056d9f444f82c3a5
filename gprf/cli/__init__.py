"""Command-line interface: ``python -m gprf compare`` (or the ``gprf`` console script): the kernel approximations
against the exact GP on your data.

New approximations for ``compare`` are registered in :mod:`gprf.cli.approximations`. The speed and accuracy
benchmarks are not installed with the package: they live in the repository's ``benchmarks/`` folder
(``python -m benchmarks`` from the repository root).
"""

from gprf.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
