"""Readability checks of a drawn matplotlib figure: labelled ticks on every axis, and texts that do not overlap."""

from __future__ import annotations

from itertools import combinations

import numpy as np


def _drawn_tick_labels(axis, minor: bool = False) -> list:
    """The visible, non-empty tick labels of an ``XAxis``/``YAxis`` whose ticks lie within its view limits (the
    axis may keep labels of ticks beyond them, which are not drawn); compared in the axis's scale, so a log axis
    is handled like a linear one."""
    scale = axis.get_transform().transform
    low, high = sorted(float(value) for value in scale(np.asarray(axis.get_view_interval(), dtype=float)))
    slack = 1e-9 * max(high - low, 1.0)
    coordinate = 0 if axis.axis_name == "x" else 1
    return [
        label
        for label in axis.get_ticklabels(minor=minor)
        if label.get_visible()
        and label.get_text().strip()
        and low - slack <= float(scale(np.array([label.get_position()[coordinate]], dtype=float))[0]) <= high + slack
    ]


def labelled_ticks(axis) -> list[str]:
    """The texts of the major tick labels an ``XAxis``/``YAxis`` draws (call after a draw of the figure)."""
    return [label.get_text() for label in _drawn_tick_labels(axis)]


def _shown(texts) -> list:
    return [text for text in texts if text.get_visible() and text.get_text().strip()]


def figure_texts(figure) -> list:
    """Every visible, non-empty text of ``figure`` (tick labels, axis labels, titles, annotations such as bar labels,
    legend entries, the suptitle); of the tick labels only those within the view, as drawn."""
    from matplotlib.text import Text

    axes_axes = [axis for axes in figure.axes for axis in (axes.xaxis, axes.yaxis)]
    all_ticks = [tick for axis in axes_axes for tick in axis.get_major_ticks() + axis.get_minor_ticks()]
    tick_labels = {id(label) for tick in all_ticks for label in (tick.label1, tick.label2)}
    others = [text for text in figure.findobj(Text) if id(text) not in tick_labels]
    drawn_ticks = [label for axis in axes_axes for label in _drawn_tick_labels(axis) + _drawn_tick_labels(axis, True)]
    return _shown(others) + drawn_ticks


def overlapping_texts(figure) -> list[tuple[str, str]]:
    """Pairs of texts of ``figure`` whose rendered bounding boxes overlap (draws the figure on its canvas first)."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    boxes = [(text.get_text(), text.get_window_extent(renderer)) for text in figure_texts(figure)]
    return [(a, b) for (a, box_a), (b, box_b) in combinations(boxes, 2) if box_a.overlaps(box_b)]


def assert_readable(figure) -> None:
    """Each axes has two labelled ticks or more on each axis (itself or a sibling it shares that axis with), and no
    two texts of the figure overlap."""
    assert overlapping_texts(figure) == []
    for axes in figure.axes:
        for name in ("x", "y"):
            siblings = getattr(axes, f"get_shared_{name}_axes")().get_siblings(axes)
            counts = [len(labelled_ticks(getattr(sibling, f"{name}axis"))) for sibling in siblings]
            assert max(counts) >= 2, (
                f"{axes.get_title() or axes.get_xlabel()!r}: {name} axis with {max(counts)} label(s)"
            )
