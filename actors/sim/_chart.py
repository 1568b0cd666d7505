"""Charts of collected series as a standalone SVG (no plotting library needed).

One panel per numeric series, each with its own vertical scale (a share and a count do not
fit one axis), all over the same time range, and each with its own time axis (ticks, grid lines
and labels under every panel, so a panel read alone still says when). Virtual times past two
minutes are labelled as durations since the start (``30m``, ``1h 30m``, ``2d 6h``), on steps
that suit a clock (1, 2, 5, 10, 15, 30 minutes; 1, 2, 3, 6, 12 hours; days).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any, Protocol

__all__ = ["svg_chart"]


class Columns(Protocol):
    """What a chart reads of a table (`actors.sim.Table` is one): named columns and rows."""

    @property
    def columns(self) -> Sequence[str]: ...

    @property
    def rows(self) -> Sequence[Mapping[str, Any]]: ...


_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_WIDTH = 760
_PANEL = 165  # height of one panel: its title, its plot, its time axis
_INNER = _PANEL - 55  # height of a panel's plot
_LEFT, _RIGHT, _TOP = 70, 24, 44


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _ticks(low: float, high: float, count: int = 4) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    value = math.ceil(low / step) * step
    ticks = []
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _label(value: float) -> str:
    return f"{value:g}" if abs(value) < 1e6 else f"{value:.2e}"


_MINUTE, _HOUR, _DAY = 60.0, 3600.0, 86400.0
# Tick steps a reader counts in, in seconds: minutes, hours, days.
_CLOCK_STEPS = (
    *(m * _MINUTE for m in (1, 2, 5, 10, 15, 30)),
    *(h * _HOUR for h in (1, 2, 3, 6, 12)),
    *(d * _DAY for d in (1, 2, 7, 14, 30, 60, 90, 180, 365)),
)


def _time_ticks(low: float, high: float, count: int = 6) -> tuple[list[float], bool]:
    """Ticks over ``[low, high]`` and whether to label them as clock durations."""
    if high - low <= 2 * _MINUTE:
        return _ticks(low, high, count), False
    raw = (high - low) / count
    step = next((s for s in _CLOCK_STEPS if s >= raw), None)
    if step is None:  # past years: plain numbers of days would do no better
        return _ticks(low, high, count), False
    value = math.ceil(low / step) * step
    ticks = []
    while value <= high + step * 1e-9:
        ticks.append(value)
        value += step
    return ticks, True


def _clock(seconds: float) -> str:
    """``seconds`` as a short duration: ``0``, ``45s``, ``30m``, ``1h 30m``, ``2d 6h``."""
    if seconds == 0:
        return "0"
    sign = "-" if seconds < 0 else ""
    left = round(abs(seconds))
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        amount, left = divmod(left, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return sign + " ".join(parts[:2])


def _series(table: Columns, x: str) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for name in table.columns:
        if name == x:
            continue
        points = []
        for row in table.rows:
            px, py = _number(row.get(x)), _number(row.get(name))
            if px is not None and py is not None:
                points.append((px, py))
        if points:
            out[name] = points
    return out


def _time_axis(
    ticks: list[float], clock: bool, sx: Callable[[float], float], bottom: float
) -> list[str]:
    """A panel's time axis: a grid line, a tick mark and a label at each tick."""
    out = []
    for tick in ticks:
        x = sx(tick)
        label = _clock(tick) if clock else _label(tick)
        out.append(
            f'<line x1="{x:.1f}" y1="{bottom - _INNER:.1f}" x2="{x:.1f}" y2="{bottom:.1f}" '
            'stroke="#f2f2f2"/>'
        )
        out.append(
            f'<line x1="{x:.1f}" y1="{bottom:.1f}" x2="{x:.1f}" y2="{bottom + 4:.1f}" '
            'stroke="#888"/>'
        )
        # The last label would run past the chart's right edge if centred on its tick.
        anchor = "end" if x > _WIDTH - _RIGHT - 12 else "middle"
        out.append(
            f'<text class="time-tick" x="{x:.1f}" y="{bottom + 15:.1f}" '
            f'text-anchor="{anchor}">{escape(label)}</text>'
        )
    return out


def svg_chart(table: Columns, *, title: str = "", x: str = "time") -> str:
    """The numeric columns of ``table`` over ``x``: a panel each, stacked, each with a time axis."""
    series = _series(table, x)
    xs = [p[0] for points in series.values() for p in points] or [0.0, 1.0]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x1 = x0 + 1
    plot_width = _WIDTH - _LEFT - _RIGHT
    height = _TOP + max(1, len(series)) * _PANEL + 40

    def sx(v: float) -> float:
        return _LEFT + (v - x0) / (x1 - x0) * plot_width

    time_ticks, clock = _time_ticks(x0, x1)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
        f'viewBox="0 0 {_WIDTH} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{_WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{_LEFT}" y="24" font-size="15" font-weight="bold">{escape(title)}</text>',
    ]
    if not series:
        out.append(
            f'<text x="{_WIDTH / 2}" y="{_TOP + _PANEL / 2}" text-anchor="middle" '
            'fill="#777">no numeric series collected</text>'
        )
    for index, (name, points) in enumerate(series.items()):
        color = _COLORS[index % len(_COLORS)]
        top = _TOP + index * _PANEL + 18
        ys = [p[1] for p in points]
        y0, y1 = min(min(ys), 0.0), max(ys)
        if y1 == y0:
            y1 = y0 + 1

        def sy(v: float, y0: float = y0, y1: float = y1, top: float = top) -> float:
            return top + _INNER - (v - y0) / (y1 - y0) * _INNER

        out.append(
            f'<text x="{_LEFT}" y="{top - 6}" font-size="12" font-weight="bold" '
            f'fill="{color}">{escape(name)}</text>'
        )
        for tick in _ticks(y0, y1):
            y = sy(tick)
            out.append(
                f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + plot_width}" y2="{y:.1f}" '
                'stroke="#ececec"/>'
            )
            out.append(
                f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_label(tick)}</text>'
            )
        out.extend(_time_axis(time_ticks, clock, sx, top + _INNER))
        out.append(
            f'<rect x="{_LEFT}" y="{top}" width="{plot_width}" height="{_INNER}" fill="none" '
            'stroke="#bbb"/>'
        )
        path = " ".join(f"{sx(px):.1f},{sy(py):.1f}" for px, py in points)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
    if not series:
        out.extend(_time_axis(time_ticks, clock, sx, _TOP + 18 + _INNER))
    axis = _TOP + max(1, len(series)) * _PANEL + 6
    unit = "since the start" if clock else "virtual seconds"
    out.append(
        f'<text x="{_LEFT + plot_width / 2}" y="{axis}" text-anchor="middle">'
        f"{escape(x)} ({unit})</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"
