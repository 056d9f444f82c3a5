"""benchmarks.options: the comma-separated subset type of --methods and --bo-methods."""

from __future__ import annotations

import argparse

import pytest

from benchmarks.options import subset_of


def test_subset_of_keeps_the_choices_order_and_names_unknown_entries():
    parse = subset_of(("a", "b", "c"), "letter")
    assert parse(" c, a ,c") == ["a", "c"]
    with pytest.raises(argparse.ArgumentTypeError, match=r"unknown letter\(s\) 'z'; choose from a, b, c"):
        parse("a,z")
    with pytest.raises(argparse.ArgumentTypeError, match="none given"):
        parse(" , ")
