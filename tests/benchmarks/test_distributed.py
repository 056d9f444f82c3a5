"""The distributed benchmark at tiny sizes: every configuration is measured, the counted bytes equal the formula,
and the efficiencies follow their definitions."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks.distributed import BLOCK_ROWS, data_rows, main, step_bytes, with_efficiencies


def test_reports_weak_and_strong_scaling_with_the_bytes_of_the_formula(tmp_path, capsys):
    out = tmp_path / "distributed.json"
    options = ["--processes", "1,2", "--rows-per-process", "300", "--total-rows", "400", "--features", "16",
               "--dims", "3", "--dtype", "float64", "--steps", "2", "--warmup", "0", "--json", str(out)]  # fmt: skip
    assert main(options) == 0
    report = json.loads(out.read_text())
    printed = capsys.readouterr().out
    assert "weak scaling" in printed and "strong scaling" in printed and "load average" in printed
    for kind, rows_per_process in (("weak", {1: 300, 2: 300}), ("strong", {1: 400, 2: 200})):
        rows = report[kind]
        assert [row["processes"] for row in rows] == [1, 2]
        base = rows[0]["step_seconds"]
        for row in rows:
            k = row["processes"]
            assert row["rows_per_process"] == rows_per_process[k]
            assert row["bytes_per_step"] == row["bytes_formula"] == step_bytes(16, 3, k)
            assert row["rows_per_second"] == pytest.approx(k * rows_per_process[k] / row["step_seconds"])
            scale = 1 if kind == "weak" else k
            assert row["efficiency"] == pytest.approx(base / (scale * row["step_seconds"]))
            assert row["peak_above_data_bytes"] is None or row["peak_above_data_bytes"] >= 0
    # The same model and data of all rows on one and on two processes: the same marginal likelihood.
    assert report["strong"][0]["loss"] == pytest.approx(report["strong"][1]["loss"], rel=1e-12)


def test_shards_are_rows_of_one_data_set():
    whole = data_rows(BLOCK_ROWS - 5, BLOCK_ROWS + 7, 3, torch.float64)
    parts = [
        data_rows(BLOCK_ROWS - 5, BLOCK_ROWS, 3, torch.float64),
        data_rows(BLOCK_ROWS, BLOCK_ROWS + 7, 3, torch.float64),
    ]
    for index in range(2):
        assert torch.equal(torch.cat([part[index] for part in parts]), whole[index])
    assert whole[0].shape == (12, 3) and whole[1].shape == (12,)


def test_the_byte_formula():
    # Two 16-number headers, 528 + 32 + 2 summed, 2 x 34 fingerprint slots, 8 + 3 gradients; float64.
    assert step_bytes(32, 8, 2) == 8 * (32 + 562 + 68 + 11)


def test_efficiencies_need_the_one_process_row():
    rows = [{"processes": 1, "step_seconds": 2.0}, {"processes": 2, "step_seconds": 2.5}]
    weak, strong = with_efficiencies(rows, "weak"), with_efficiencies(rows, "strong")
    assert [row["efficiency"] for row in weak] == [1.0, 0.8]
    assert [row["efficiency"] for row in strong] == [1.0, 0.4]


def test_bad_options_are_refused(capsys):
    with pytest.raises(SystemExit):
        main(["--processes", "0,2"])
    assert "expected positive integers" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--total-rows", "1", "--processes", "1,2"])
    assert "--total-rows at least the largest process count" in capsys.readouterr().err
