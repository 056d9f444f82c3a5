"""The example scripts run as their docs say (repository content, not a module of gprf).

``examples/distributed_training.py`` runs under ``torchrun`` exactly as ``docs/distributed.rst`` shows, and rank 0's
checkpoint, restored in one process holding every rank's rows, gives the test RMSE the sharded run printed.

Every script's ``--quick`` mode runs to completion from a scratch directory, writes only into the folder it is told
(``--out DIR``; ``--plot`` draws ``<example>.png`` there) and leaves the repository's working tree unchanged. Each
example's run is its own test (the quick modes take seconds to about a minute each on one thread), marked ``slow`` and
``examples`` (``pytest -m examples`` runs only these). ``examples/_output.py``, their shared ``--out``/``--plot``
handling, is tested here in-process: the default folder is announced, and refused inside the package or the docs.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

import gprf

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTED_TRAINING = ROOT / "examples" / "distributed_training.py"
#: Seconds the torchrun run may take (two processes on two busy cores: about 25 s).
RUN_TIMEOUT = 300


def _load_example(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _torchrun(script: Path, processes: int, *arguments: str) -> subprocess.CompletedProcess:
    # This checkout's gprf, one thread per process (the processes share the machine's cores).
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}"]
    return subprocess.run(
        [*command, str(script), *arguments],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )


@pytest.mark.parametrize(
    ("backend", "processes"),
    [
        pytest.param("gloo", 2, id="gloo-cpu"),
        pytest.param(
            "nccl",
            min(2, torch.cuda.device_count()),
            id="nccl-cuda",
            marks=pytest.mark.skipif(
                not (torch.cuda.is_available() and dist.is_nccl_available()),
                reason="the NCCL variant needs a CUDA GPU and a torch built with NCCL",
            ),
        ),
    ],
)
def test_distributed_training_under_torchrun_matches_one_process(backend, processes, tmp_path):
    completed = _torchrun(DISTRIBUTED_TRAINING, processes, "--quick", "--backend", backend, "--out", str(tmp_path))
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    example = _load_example(DISTRIBUTED_TRAINING)
    args = example.parse_arguments(["--quick"])
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["processes"] == processes
    assert result["training_rows"] == processes * args.rows_per_process
    printed = f"{processes} process(es), {result['training_rows']} training rows in all: test RMSE "
    assert f"{printed}{result['test_rmse']:.4f}, learned noise {result['noise']:.4f}" in completed.stdout

    # One process holding every rank's rows, with rank 0's checkpoint: the same posterior, so the same test RMSE.
    shards = [
        example.shard(rank, args.rows_per_process + args.test_rows_per_process, args.dims, args.seed)
        for rank in range(processes)
    ]
    train_x = torch.cat([x[: args.rows_per_process] for x, _ in shards])
    train_y = torch.cat([y[: args.rows_per_process] for _, y in shards])
    test_x = torch.cat([x[args.rows_per_process :] for x, _ in shards])
    test_y = torch.cat([y[args.rows_per_process :] for _, y in shards])
    model = example.ShardGP(train_x, train_y, args.features).double()
    model.load_state_dict(torch.load(tmp_path / "model.pt", map_location="cpu"))
    model.eval()
    with torch.no_grad():
        mean = model(test_x).mean
    assert model.likelihood.noise.item() == pytest.approx(result["noise"], rel=1e-12)
    # The sharded run summed the F x F statistics over ranks, this one over rows: equal to float64 rounding.
    assert math.sqrt((mean - test_y).square().mean().item()) == pytest.approx(result["test_rmse"], rel=1e-9)


# How each example writes: tables (<example>.md) and, with --plot, its figure into --out; a checkpoint only; nothing.
WRITES_TABLES = {
    "complex_posterior",
    "fourier_samplers",
    "maclaurin_regression",
    "polynomial_sketches",
    "sketch_featurization_timing",
}
WRITES_CHECKPOINT = {"distributed_training"}
WRITES_NOTHING = {"large_n_memory"}
EXTRA_ARGUMENTS = {"distributed_training": ["--processes", "1"]}  # one gloo process: torchrun's two are tested above
EXAMPLES = sorted(path.stem for path in (ROOT / "examples").glob("*.py") if not path.stem.startswith("_"))
PLOTTING = sorted(set(EXAMPLES) - WRITES_CHECKPOINT - WRITES_NOTHING)


def working_tree_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def output_arguments(example: str, folder: Path) -> list[str]:
    if example in WRITES_NOTHING:
        return []
    if example in WRITES_CHECKPOINT:
        return ["--out", str(folder / "out")]
    return ["--out", str(folder / "out"), "--plot"]


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_example_declares_quick_and_its_output_arguments(example):
    """A new example needs a --quick mode; one with a figure takes examples/_output.py's --out DIR and --plot."""
    source = (ROOT / "examples" / f"{example}.py").read_text(encoding="utf-8")
    assert '"--quick"' in source
    if example in PLOTTING:
        assert f'add_output_arguments(parser, "{example}"' in source
        assert f'output_folder(parser, args, "{example}")' in source
        assert re.search(rf'write_outputs\(\s*output,\s*"{example}"', source)
        assert '"--plot"' not in source  # the flag comes from the shared helper, not a path option of its own
    elif example in WRITES_CHECKPOINT:
        assert '"--out"' in source


def arguments_without_help(source: str) -> list[str]:
    """The first option string (or line) of every ``add_argument`` call in ``source`` whose help is missing or blank.

    Read from the syntax tree, not from a built parser: most examples build theirs inside ``main`` and run at once.
    """
    missing = []
    for node in ast.walk(ast.parse(source)):
        if not (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
        ):
            continue
        help_text = next((keyword.value for keyword in node.keywords if keyword.arg == "help"), None)
        blank = isinstance(help_text, ast.Constant) and not (
            isinstance(help_text.value, str) and help_text.value.strip()
        )
        if help_text is None or blank:
            name = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
            missing.append(name or f"line {node.lineno}")
    return missing


def test_arguments_without_help_finds_missing_and_blank_help():
    source = """
parser.add_argument("--a", help="the a")
parser.add_argument("--b", type=int)
parser.add_argument("--c", help="  ")
parser.add_argument("--d", help=None)
parser.add_argument("--e", help=f"the {name}")
"""
    assert arguments_without_help(source) == ["--b", "--c", "--d"]


@pytest.mark.parametrize("script", sorted(path.name for path in (ROOT / "examples").glob("*.py")))
def test_every_example_option_has_a_help_text(script):
    assert arguments_without_help((ROOT / "examples" / script).read_text(encoding="utf-8")) == []


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
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert result.returncode == 0, f"{example} --quick failed:\n{result.stderr[-3000:]}"
    assert working_tree_status() == before
    # Nothing written to the scratch working directory beside the folder it was pointed at.
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]
    written = sorted(path.name for path in (tmp_path / "out").iterdir())
    if example in PLOTTING:
        assert written == sorted([f"{example}.png", *([f"{example}.md"] if example in WRITES_TABLES else [])])
        assert (tmp_path / "out" / f"{example}.png").stat().st_size > 0
        assert f"writing to {tmp_path / 'out'}" in result.stdout
    elif example in WRITES_CHECKPOINT:
        assert written == ["model.pt", "result.json"]
    else:
        assert written == []


# ------------------------------------------------------------------------------- examples/_output.py, in-process
OUTPUT = _load_example(ROOT / "examples" / "_output.py")


def _parsed(argv: list[str]) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    parser = argparse.ArgumentParser(prog="example")
    OUTPUT.add_output_arguments(parser, "example", tables="example.md")
    return parser, parser.parse_args(argv)


def test_the_default_folder_is_announced_and_created_in_the_current_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    folder = OUTPUT.output_folder(*_parsed([]), "example")
    assert folder == Path("example_output")
    assert (tmp_path / "example_output").is_dir()
    assert capsys.readouterr().out == "writing to example_output (the default; choose the folder with --out DIR)\n"


@pytest.mark.parametrize("inside", [ROOT / "docs" / "_static", Path(gprf.__file__).resolve().parent / "kernels"])
def test_the_default_folder_is_refused_inside_the_docs_or_the_package(inside, monkeypatch, capsys):
    before = sorted(inside.iterdir())
    monkeypatch.chdir(inside)
    with pytest.raises(SystemExit):
        OUTPUT.output_folder(*_parsed(["--plot"]), "example")
    assert "the default output folder ./example_output would be inside" in capsys.readouterr().err
    assert sorted(inside.iterdir()) == before


def test_an_explicit_folder_may_be_the_docs_figures(monkeypatch, capsys):
    # The documented way to regenerate a docs figure: --out docs/_static --plot (the folder exists: nothing created).
    monkeypatch.chdir(ROOT)
    assert OUTPUT.output_folder(*_parsed(["--out", "docs/_static", "--plot"]), "example") == Path("docs/_static")
    assert capsys.readouterr().out == "writing to docs/_static\n"


def test_a_file_in_place_of_the_folder_is_a_parser_error(tmp_path, capsys):
    (tmp_path / "taken").write_text("")
    with pytest.raises(SystemExit):
        OUTPUT.output_folder(*_parsed(["--out", str(tmp_path / "taken")]), "example")
    assert f"argument --out: {str(tmp_path / 'taken')!r} exists and is not a folder" in capsys.readouterr().err


def test_plot_writes_the_figure_into_the_folder(tmp_path, capsys):
    parser, args = _parsed(["--out", str(tmp_path / "out"), "--plot"])
    assert args.plot is True
    folder = OUTPUT.output_folder(parser, args, "example")
    written = OUTPUT.write_outputs(folder, "example", table="| a |", draw=lambda path: path.write_bytes(b"png"))
    assert written == [tmp_path / "out" / "example.md", tmp_path / "out" / "example.png"]
    assert (tmp_path / "out" / "example.md").read_text() == "| a |\n"
    assert (tmp_path / "out" / "example.png").read_bytes() == b"png"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]
    assert capsys.readouterr().out.splitlines()[-1] == f"wrote {written[0]} and {written[1]}"
