"""gprf.cli.report: tables, number formats, JSON without NaN, and progress lines."""

from __future__ import annotations

import json

import pytest

from gprf.cli.report import Progress, format_number, format_seconds, format_table, write_json


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
