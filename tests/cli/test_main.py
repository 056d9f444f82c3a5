"""``python -m gprf`` (gprf.cli.main and gprf/__main__.py): the entry point, its help, the missing command, and both
commands on each device."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gprf import __version__
from gprf.cli import build_parser, main
from tests.cli.conftest import TINY_BENCH, TINY_COMPARE


def test_python_dash_m_gprf_help():
    result = subprocess.run([sys.executable, "-m", "gprf", "--help"], capture_output=True, text=True, check=True)
    assert "compare" in result.stdout and "bench" in result.stdout


def test_missing_command_is_an_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([])
    assert exit_info.value.code == 2
    assert "required: <command>" in capsys.readouterr().err


def test_compare_and_bench_run_on_each_device(capsys, device):
    assert main([*TINY_COMPARE, "--methods", "rff", "--device", str(device)]) == 0
    assert f"float64 on {device}" in capsys.readouterr().out
    assert main([*TINY_BENCH, "--device", str(device), "--exact-max-n", "200"]) == 0
    assert "ratio gprf/exact" in capsys.readouterr().out


def test_parser_knows_both_commands_and_the_version(capsys):
    parser = build_parser()
    assert parser.prog == "python -m gprf"
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--version"])
    assert exit_info.value.code == 0
    assert __version__ in capsys.readouterr().out
    assert parser.parse_args(["compare"]).command == "compare" and parser.parse_args(["bench"]).command == "bench"
