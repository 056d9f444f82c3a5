"""Command-line interface: ``python -m gprf compare`` (approximations vs the exact GP on your data) and
``python -m gprf bench`` (speed against GPyTorch's RFFKernel and the exact GP).

New approximations for ``compare`` are registered in :mod:`gprf.cli.approximations`.
"""

from gprf.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
