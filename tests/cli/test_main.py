"""``python -m gprf`` (gprf.cli.main and gprf/__main__.py): the entry point, its help, the missing command, compare on
each device, bad inputs to it, each a one-line argparse error with exit status 2, and the pointer that ``bench`` gives
to the benchmarks' new home."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from gprf import __version__
from gprf.cli import build_parser, main
from gprf.cli.kernel_spec import MAX_NESTING
from gprf.cli.main import BENCH_MOVED, console_script
from tests.helpers.command_line import TINY_COMPARE, cli_error, options_without_help


def test_every_option_of_every_command_has_help():
    parser = build_parser()
    commands = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    assert set(commands.choices) == {"compare", "bench"}  # the walk below reaches every subcommand
    assert list(options_without_help(parser)) == []


def test_python_dash_m_gprf_help():
    result = subprocess.run([sys.executable, "-m", "gprf", "--help"], capture_output=True, text=True, check=True)
    assert "compare" in result.stdout and "bench" in result.stdout


def test_missing_command_is_an_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert "required: <command>" in capsys.readouterr().err


def test_compare_runs_on_each_device(capsys, device):
    assert main([*TINY_COMPARE, "--methods", "rff", "--device", str(device)]) == 0
    assert f"float64 on {device}" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [[], ["--what", "all", "--threads", "1"], ["--help"], ["-h", "--n=5", "x"]])
def test_bench_points_to_the_benchmarks_and_fails(capsys, argv):
    """Any earlier ``bench`` command line, help included, gets one line on stderr naming the new command, and a
    non-zero exit status; nothing runs."""
    assert main(["bench", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"python -m gprf bench: {BENCH_MOVED}\n"
    assert "'python -m benchmarks [options]'" in BENCH_MOVED


def test_the_console_script_is_gprf(capsys, monkeypatch):
    """The ``gprf`` command runs the same parser under its own name."""
    monkeypatch.setattr("sys.argv", ["gprf", "bench"])
    assert console_script() == 2
    assert capsys.readouterr().err.startswith("gprf bench: the benchmarks are not part of the installed package")
    assert build_parser("gprf").prog == "gprf"


def test_parser_knows_both_commands_and_the_version(capsys):
    parser = build_parser()
    assert parser.prog == "python -m gprf"
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--version"])
    assert exit_info.value.code == 0
    assert __version__ in capsys.readouterr().out
    assert parser.parse_args(["compare"]).command == "compare" and parser.parse_args(["bench"]).command == "bench"
    assert "moved: run 'python -m benchmarks' from the repository" in parser.format_help()


def _csv(header: str, row: str = "{a},{b},{y}", num_rows: int = 30) -> str:
    """A CSV of ``header`` and ``num_rows`` rows of distinct numbers (``row`` formats ``a``, ``b`` and ``y``)."""
    rows = [row.format(a=i, b=(7 * i) % 30, y=(i * i) % 11) for i in range(num_rows)]
    return "\n".join([header, *rows]) + "\n"


NESTED = "(" * 5000 + "rbf" + ")" * 5000
# Bad CSV files for compare and the error fragment.
BAD_FILES = [
    (lambda path: path.write_text(_csv("a,a,y")), "names column(s) 'a' more than once"),
    (lambda path: path.write_text(_csv("a,b,y") + "x,1,2\n"), "column 'a' mixes numbers and text (line 32"),
    (lambda path: path.write_text(_csv("a,b,y") + "1e400,1,2\n"), "column 'a' line 32: '1e400' is beyond"),
    (lambda path: path.write_bytes(b"a,b,y\n\xff\xfe,1,2\n"), "is not UTF-8 text"),
]


@pytest.mark.parametrize(("write", "message"), BAD_FILES)
def test_bad_data_files_are_one_line_errors(tmp_path, capsys, write, message):
    write(tmp_path / "d.csv")
    argv = ["compare", "--data", str(tmp_path / "d.csv"), "--target", "y", "--quiet"]
    assert message in cli_error(capsys, argv)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-train", "1"], "argument --max-train: at least 2 training rows are needed"),
        (["--kernel", NESTED], f"argument --kernel: expected a kernel name: parentheses nest at most {MAX_NESTING}"),
        (["--kernel", "rbf[" + "9" * 5000 + "]"], "expected a column number of at most 9 digits at position 4"),
        (["--kernel", "poly" + "9" * 5000], f"not 'poly{'9' * 36}...' at position 0"),
        (["--kernel", "rbf+rbf[0:123456789]"], "an end column in 1 .. 10 at position 10"),
    ],
)
def test_bad_compare_options_are_one_line_errors(capsys, args, message):
    message_line = cli_error(capsys, [*TINY_COMPARE, *args])
    assert message in message_line and len(message_line) < 400


def test_a_polynomial_degree_the_dtype_cannot_factor_is_a_clear_error(capsys):
    """poly99 on standardised inputs spans about 100 orders of magnitude: the run stops with an error that names
    --kernel and the fix instead of a NotPSDError traceback."""
    message = cli_error(capsys, [*TINY_COMPARE, "--methods", "rff", "--kernel", "poly99"])
    assert "failed (NotPSDError) with --kernel poly99 in float64; try a lower degree P of polyP" in message
