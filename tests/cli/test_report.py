"""Tables, numbers, JSON and timing helpers of the CLI (gprf.cli.report, gprf.cli.timing, gprf.cli.options)."""

from __future__ import annotations

import argparse
import json

import pytest
import torch

from gprf.cli.options import CLIError, fraction, positive_int, resolve_device
from gprf.cli.report import Progress, format_number, format_seconds, format_table, write_json
from gprf.cli.timing import interleaved_timings, timed


def test_format_table_aligns_columns():
    text = format_table(["method", "KL"], [["rff", "0.1"], ["exact", "12.25"]])
    lines = text.splitlines()
    assert lines[0].split() == ["method", "KL"] and set(lines[1]) == {"-", " "}
    assert lines[2] == "rff       0.1" and lines[3] == "exact   12.25"
    with pytest.raises(ValueError, match="cells"):
        format_table(["a"], [["1", "2"]])


def test_number_formats():
    assert format_number(None) == "-" and format_number(0.0123456) == "0.01235"
    assert format_seconds(None) == "-" and format_seconds(0.0123456) == "0.0123" and format_seconds(123.4) == "123"


def test_write_json_turns_nan_into_null(tmp_path):
    path = tmp_path / "x.json"
    write_json(path, {"a": [1.0, float("nan")], "b": {"c": float("inf")}})
    assert json.loads(path.read_text()) == {"a": [1.0, None], "b": {"c": None}}


def test_progress_writes_lines_only_when_enabled(capsys):
    Progress("t")("hello")
    Progress("t", enabled=False)("hidden")
    err = capsys.readouterr().err
    assert "hello" in err and "hidden" not in err and err.startswith("[t ")


def test_interleaved_timings_calls_each_function_warmup_plus_repeats_times():
    calls = {"a": 0, "b": 0}

    def make(name):
        def fn():
            calls[name] += 1

        return fn

    times = interleaved_timings({"a": make("a"), "b": make("b")}, torch.device("cpu"), repeats=3, warmup=2)
    assert calls == {"a": 5, "b": 5}
    assert {k: len(v) for k, v in times.items()} == {"a": 3, "b": 3}
    assert timed(lambda: 4, torch.device("cpu"))[0] == 4


def test_argument_types_and_device():
    assert positive_int("3") == 3 and fraction("0.5") == 0.5
    for bad in ("0", "x", "-1"):
        with pytest.raises(argparse.ArgumentTypeError):
            positive_int(bad)
    with pytest.raises(argparse.ArgumentTypeError):
        fraction("1")
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(CLIError, match="--device"):
        resolve_device("banana")
