"""gprf.cli.options: argument types, devices, output paths and thread counts of the CLI."""

from __future__ import annotations

import argparse
import sys

import pytest
import torch

from gprf.cli.options import (
    CLIError,
    apply_threads,
    check_output_path,
    fraction,
    positive_int,
    require_matplotlib,
    resolve_device,
)


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


def test_output_paths_must_be_in_an_existing_folder(tmp_path):
    check_output_path(None, "--json")
    check_output_path(str(tmp_path / "out.json"), "--json")
    with pytest.raises(CLIError, match="argument --json: folder .* does not exist"):
        check_output_path(str(tmp_path / "missing" / "out.json"), "--json")
    with pytest.raises(CLIError, match="argument --plot: .* is a directory"):
        check_output_path(str(tmp_path), "--plot")


def test_plotting_without_matplotlib_is_a_clear_error_naming_the_option(monkeypatch):
    require_matplotlib("--plot")  # installed with the test extra: no error
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an environment without matplotlib imports
    with pytest.raises(CLIError, match=r"argument --bo-plot: needs matplotlib \(pip install matplotlib\)"):
        require_matplotlib("--bo-plot")


def test_apply_threads_sets_the_intra_op_thread_count():
    previous = torch.get_num_threads()
    try:
        apply_threads(1)
        assert torch.get_num_threads() == 1
        apply_threads(None)  # None keeps the current setting
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(previous)
