"""examples/: every script's ``--quick`` mode runs to completion from a scratch directory, writes only where it is told
(``--out DIR`` or ``--plot PATH`` inside that directory) and leaves the repository's working tree unchanged.

Each example's run is its own test (the quick modes take seconds to about a minute each on one thread), marked
``slow`` and ``examples`` (``pytest -m examples`` runs only these).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(path.stem for path in (ROOT / "examples").glob("*.py"))

# How each example is told where to write: a directory for its tables and figures, or the path of its one figure.
WRITES_DIRECTORY = {
    "complex_posterior",
    "fourier_samplers",
    "maclaurin_regression",
    "polynomial_sketches",
    "sketch_featurization_timing",
}
WRITES_NOTHING = {"large_n_memory"}
EXTRA_ARGUMENTS = {"distributed_training": ["--processes", "1"]}  # one gloo process: the same code path, half the time
QUICK_TIMEOUT_S = 300


def working_tree_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def output_arguments(example: str, folder: Path) -> list[str]:
    if example in WRITES_DIRECTORY:
        return ["--out", str(folder / "out")]
    if example in WRITES_NOTHING or example in EXTRA_ARGUMENTS:
        return []
    return ["--plot", str(folder / "out" / f"{example}.png")]


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_declares_quick_and_its_output_argument(example, tmp_path):
    """A new example needs a --quick mode and is told where to write by the argument this file passes it."""
    source = (ROOT / "examples" / f"{example}.py").read_text(encoding="utf-8")
    assert '"--quick"' in source
    for option in output_arguments(example, tmp_path)[:1]:
        assert f'"{option}"' in source


@pytest.mark.slow
@pytest.mark.examples
@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
@pytest.mark.parametrize("example", EXAMPLES)
def test_quick_mode_runs_and_leaves_the_tree_unchanged(example, tmp_path):
    pytest.importorskip("matplotlib")
    pytest.importorskip("sklearn")
    (tmp_path / "out").mkdir()
    before = working_tree_status()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    command = [
        sys.executable,
        str(ROOT / "examples" / f"{example}.py"),
        "--quick",
        *output_arguments(example, tmp_path),
        *EXTRA_ARGUMENTS.get(example, []),
    ]
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=QUICK_TIMEOUT_S)
    assert result.returncode == 0, f"{example} --quick failed:\n{result.stderr[-3000:]}"
    assert working_tree_status() == before
    # Nothing written to the scratch working directory beside the folder it was pointed at.
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]
    if example in WRITES_DIRECTORY:
        assert sorted(path.suffix for path in (tmp_path / "out").iterdir()) == [".md", ".png"]
    elif example not in WRITES_NOTHING and example not in EXTRA_ARGUMENTS:
        assert (tmp_path / "out" / f"{example}.png").stat().st_size > 0
