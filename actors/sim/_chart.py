"""A line chart of collected series as a standalone SVG (no plotting library needed)."""

from __future__ import annotations

import math
from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.sim._table import Table

__all__ = ["svg_chart"]

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_W, _H = 760, 420
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 170, 40, 50


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _label(value: float) -> str:
    return f"{value:g}" if abs(value) < 1e6 else f"{value:.2e}"


def svg_chart(table: Table, *, title: str = "", x: str = "time") -> str:
    """The numeric columns of ``table`` as lines over ``x``, one colour each, with a legend."""
    names = [c for c in table.columns if c != x]
    series: dict[str, list[tuple[float, float]]] = {}
    for name in names:
        points = []
        for row in table.rows:
            px, py = _number(row.get(x)), _number(row.get(name))
            if px is not None and py is not None:
                points.append((px, py))
        if points:
            series[name] = points
    xs = [p[0] for pts in series.values() for p in pts] or [0.0, 1.0]
    ys = [p[1] for pts in series.values() for p in pts] or [0.0, 1.0]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(min(ys), 0.0), max(ys)
    if x1 == x0:
        x1 = x0 + 1
    if y1 == y0:
        y1 = y0 + 1
    width, height = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def sx(v: float) -> float:
        return _LEFT + (v - x0) / (x1 - x0) * width

    def sy(v: float) -> float:
        return _TOP + height - (v - y0) / (y1 - y0) * height

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" font-family="sans-serif" font-size="12">',
        f'<rect width="{_W}" height="{_H}" fill="white"/>',
        f'<text x="{_LEFT}" y="24" font-size="15" font-weight="bold">{escape(title)}</text>',
    ]
    for tick in _ticks(y0, y1):
        y = sy(tick)
        out.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + width}" y2="{y:.1f}" stroke="#e5e5e5"/>'
        )
        out.append(f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_label(tick)}</text>')
    for tick in _ticks(x0, x1):
        xx = sx(tick)
        out.append(
            f'<text x="{xx:.1f}" y="{_TOP + height + 18}" text-anchor="middle">'
            f"{_label(tick)}</text>"
        )
    out.append(
        f'<rect x="{_LEFT}" y="{_TOP}" width="{width}" height="{height}" fill="none" '
        'stroke="#999"/>'
    )
    out.append(
        f'<text x="{_LEFT + width / 2}" y="{_H - 12}" text-anchor="middle">'
        f"{escape(x)} (virtual seconds)</text>"
    )
    for index, (name, points) in enumerate(series.items()):
        color = _COLORS[index % len(_COLORS)]
        path = " ".join(f"{sx(px):.1f},{sy(py):.1f}" for px, py in points)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        ly = _TOP + 10 + index * 20
        lx = _LEFT + width + 16
        out.append(
            f'<line x1="{lx}" y1="{ly}" x2="{lx + 20}" y2="{ly}" stroke="{color}" '
            'stroke-width="3"/>'
        )
        out.append(f'<text x="{lx + 26}" y="{ly + 4}">{escape(name)}</text>')
    if not series:
        out.append(
            f'<text x="{_LEFT + width / 2}" y="{_TOP + height / 2}" text-anchor="middle" '
            'fill="#777">no numeric series collected</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
