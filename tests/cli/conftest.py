"""Helpers shared by the CLI tests: tiny ``compare`` and ``bench`` configurations and readers of their output."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gprf.cli import main

TINY_COMPARE = ["compare", "--subsample", "80", "--max-train", "120", "--fit-iters", "5", "--features", "16", "--quiet"]
TINY_BENCH = ["bench", "--n", "150", "--d", "3", "--features", "16", "--test-points", "20", "--repeats", "1",
              "--warmup", "0", "--quiet"]  # fmt: skip


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


# Every sub-benchmark at tiny sizes (the exact GP off; regression: 60 rows of the bundled data, RFFKernel only).
TINY_SUB_BENCH = ["bench", "--n", "120", "--d", "3", "--features", "16", "--test-points", "20", "--repeats", "1",
                  "--warmup", "0", "--exact-max-n", "0", "--featurize-n", "50", "--featurize-dims", "3,8",
                  "--thompson-n", "150", "--thompson-exact-n", "60", "--paths", "7", "--candidates", "40",
                  "--max-n", "60", "--time-budget", "0.2", "--methods", "rff", "--rff-features", "16",
                  "--acq-n", "40,80", "--acq-exact-max-n", "40", "--acq-d", "3", "--acq-q", "2", "--acq-batches", "3",
                  "--bo-d", "3", "--bo-init", "8", "--bo-q", "2", "--bo-max-n", "12", "--bo-seeds", "1",
                  "--bo-methods", "gprf-ts,gprf-ts-tr",
                  "--composite-features", "8,32", "--composite-n", "30", "--composite-test", "10",
                  "--composite-draws", "2",
                  "--quiet"]  # fmt: skip


def run_json(tmp_path, capsys, *extra: str) -> tuple[str, dict]:
    """Run :data:`TINY_SUB_BENCH` with ``extra`` options: its printed report and its JSON report."""
    out = tmp_path / "bench.json"
    assert main([*TINY_SUB_BENCH, *extra, "--json", str(out)]) == 0
    return capsys.readouterr().out, json.loads(out.read_text())


def cli_error(capsys, argv: list[str]) -> str:
    """The message of the argparse error that ``main(argv)`` exits with: status 2, no traceback, and the message on
    the one ``<prog>: error:`` line that ends stderr."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.rstrip("\n").splitlines()[-1]
    prog = f"python -m gprf {argv[0]}: error: "
    assert last.startswith(prog), err
    return last.removeprefix(prog)
