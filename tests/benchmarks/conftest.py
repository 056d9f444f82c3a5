"""Helpers shared by the benchmarks' tests: tiny ``python -m benchmarks`` configurations, a runner that reads their
JSON report, and the reader of their argparse errors."""

from __future__ import annotations

import json

from benchmarks.bench import PROG, main
from tests.helpers.command_line import cli_error

TINY_BENCH = ["--n", "150", "--d", "3", "--features", "16", "--test-points", "20", "--repeats", "1", "--warmup", "0",
              "--quiet"]  # fmt: skip

# Every sub-benchmark at tiny sizes (the exact GP off; regression: 60 rows of the bundled data, RFFKernel only).
TINY_SUB_BENCH = ["--n", "120", "--d", "3", "--features", "16", "--test-points", "20", "--repeats", "1",
                  "--warmup", "0", "--exact-max-n", "0", "--featurize-n", "50", "--featurize-dims", "3,8",
                  "--thompson-n", "150", "--thompson-exact-n", "60", "--paths", "7", "--candidates", "40",
                  "--max-n", "60", "--time-budget", "0.2", "--methods", "rff", "--rff-features", "16",
                  "--acq-n", "40,80", "--acq-exact-max-n", "40", "--acq-d", "3", "--acq-q", "2", "--acq-batches", "3",
                  "--bo-d", "3", "--bo-init", "8", "--bo-q", "2", "--bo-max-n", "12", "--bo-seeds", "1",
                  "--bo-methods", "gprf-ts,gprf-ts-tr",
                  "--small-n", "12,24", "--small-d", "3",
                  "--small-bo-problems", "branin", "--small-bo-q", "1", "--small-bo-init", "4",
                  "--small-bo-evaluations", "5", "--small-bo-seeds", "1", "--small-bo-methods", "exact,gprf",
                  "--composite-features", "8,32", "--composite-n", "30", "--composite-test", "10",
                  "--composite-draws", "2",
                  "--quiet"]  # fmt: skip


def run_json(tmp_path, capsys, *extra: str) -> tuple[str, dict]:
    """Run :data:`TINY_SUB_BENCH` with ``extra`` options: its printed report and its JSON report."""
    out = tmp_path / "bench.json"
    assert main([*TINY_SUB_BENCH, *extra, "--json", str(out), "--out", str(tmp_path / "small_bo")]) == 0
    return capsys.readouterr().out, json.loads(out.read_text())


def bench_error(capsys, argv: list[str]) -> str:
    """The message of the argparse error that ``python -m benchmarks`` exits with on ``argv`` (see
    :func:`tests.helpers.command_line.cli_error`)."""
    return cli_error(capsys, argv, entry=main, prog=PROG)
