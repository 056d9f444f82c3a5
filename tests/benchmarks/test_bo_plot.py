"""benchmarks.bo_plot: the best values against evaluations and seconds, written to the path given."""

from __future__ import annotations

import pytest

from benchmarks.bo_plot import plot_best_values

pytest.importorskip("matplotlib")


def test_the_figure_is_written_as_a_png_where_asked(tmp_path):
    runs = {
        "exact": [{"best": [1.0, 2.0, 3.0], "evaluations": [10, 14, 18], "seconds": [0.1, 0.3, 0.6]}],
        "gprf": [
            {"best": [1.0, 2.5], "evaluations": [10, 14], "seconds": [0.1, 0.2]},
            {"best": [0.5, 1.5, 2.0], "evaluations": [10, 14, 18], "seconds": [0.1, 0.2, 0.4]},
        ],
    }
    path = tmp_path / "best.png"
    plot_best_values(runs, "a problem", path, markersize=2)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
