"""benchmarks.acquisition_proposals: loop-like data, one proposal per variant, and the report."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks.acquisition_proposals import loop_like_data, main, summarize

pytestmark = pytest.mark.usefixtures("single_thread")


def test_loop_like_data_are_sobol_points_and_local_points_around_the_best():
    x, y = loop_like_data("hartmann6", init=8, local=5, radius=0.02, seed=3)
    assert x.shape == (13, 6) and y.shape == (13, 1)
    assert bool((x >= 0).all() & (x <= 1).all())
    best = x[:8][y[:8].argmax()]
    assert float((x[8:] - best).abs().max()) < 0.02 * 6  # six standard deviations
    again, _ = loop_like_data("hartmann6", init=8, local=5, radius=0.02, seed=3)
    assert torch.equal(again, x)


def test_every_variant_proposes_and_the_report_names_them(tmp_path, capsys):
    out = tmp_path / "states.json"
    main(["--problem", "branin", "--features", "16,256", "--states", "2", "--init", "4", "--local", "2",
          "--json", str(out)])  # fmt: skip
    text = capsys.readouterr().out
    assert "proposal value" in text and "distance (mean)" in text
    states = json.loads(out.read_text())["states"]
    assert len(states) == 2
    for state in states:
        assert set(state) == {"best", "exact", "copied/16", "fitted/16", "copied/256", "fitted/256"}
        assert all(0 <= state[key]["distance"] <= 2**0.5 for key in state if key != "best")  # in the unit square
        # The approximation at 16x the features is closer to the exact posterior mean.
        assert state["copied/256"]["uniform"] < state["copied/16"]["uniform"]
    rows = summarize(states, [16, 256])
    assert [row[:2] for row in rows] == [["exact", "-"], ["copied", "16"], ["fitted", "16"], ["copied", "256"],
                                         ["fitted", "256"]]  # fmt: skip


@pytest.mark.parametrize(("argument", "value"), [("--features", "0"), ("--radius", "-1"), ("--problem", "rosenbrock")])
def test_bad_arguments_are_refused(argument, value, capsys):
    with pytest.raises(SystemExit):
        main([argument, value, "--states", "1"])
    assert argument in capsys.readouterr().err
