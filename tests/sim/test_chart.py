"""The chart of a simulation's series: one panel per series, each with its own time axis."""

from __future__ import annotations

import re

from actors.sim import Table


def tick_labels(svg: str) -> list[str]:
    return re.findall(r'<text class="time-tick"[^>]*>([^<]*)</text>', svg)


def test_every_panel_has_a_time_axis_labelled_in_clock_units() -> None:
    rows = [{"time": 60.0 * m, "posts": m, "share": m / 90} for m in range(0, 91, 5)]
    svg = Table(["time", "posts", "share"], rows).to_svg(title="a world")
    labels = tick_labels(svg)
    panel = ["0", "15m", "30m", "45m", "1h", "1h 15m", "1h 30m"]
    assert labels == panel * 2  # under each of the two panels, not only the last
    assert "time (since the start)" in svg


def test_a_short_run_is_labelled_in_virtual_seconds() -> None:
    rows = [{"time": float(t), "n": t} for t in range(0, 31, 3)]
    svg = Table(["time", "n"], rows).to_svg()
    assert tick_labels(svg) == ["0", "5", "10", "15", "20", "25", "30"]
    assert "time (virtual seconds)" in svg


def test_long_runs_count_in_days() -> None:
    rows = [{"time": 3600.0 * h, "n": h} for h in range(0, 24 * 6 + 1, 6)]
    labels = tick_labels(Table(["time", "n"], rows).to_svg())
    assert labels == ["0", "1d", "2d", "3d", "4d", "5d", "6d"]


def test_an_empty_chart_still_has_its_time_axis() -> None:
    svg = Table(["time", "label"], [{"time": 0.0, "label": "x"}]).to_svg()
    assert "no numeric series collected" in svg
    assert tick_labels(svg)
