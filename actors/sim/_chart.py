"""Charts of collected series as a standalone SVG (no plotting library needed).

One panel per numeric series, each with its own vertical scale (a share and a count do not
fit one axis), all over the same time axis.
"""

from __future__ import annotations

import math
from html import escape
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.sim._table import Table

__all__ = ["svg_chart"]

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
_WIDTH = 760
_PANEL = 150  # height of one panel, its title included
_INNER = _PANEL - 40  # height of a panel's plot
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


def _series(table: Table, x: str) -> dict[str, list[tuple[float, float]]]:
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


def svg_chart(table: Table, *, title: str = "", x: str = "time") -> str:
    """The numeric columns of ``table`` over ``x``: one panel each, stacked, one time axis."""
    series = _series(table, x)
    xs = [p[0] for points in series.values() for p in points] or [0.0, 1.0]
    x0, x1 = min(xs), max(xs)
    if x1 == x0:
        x1 = x0 + 1
    plot_width = _WIDTH - _LEFT - _RIGHT
    height = _TOP + max(1, len(series)) * _PANEL + 40

    def sx(v: float) -> float:
        return _LEFT + (v - x0) / (x1 - x0) * plot_width

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
        out.append(
            f'<rect x="{_LEFT}" y="{top}" width="{plot_width}" height="{_INNER}" fill="none" '
            'stroke="#bbb"/>'
        )
        path = " ".join(f"{sx(px):.1f},{sy(py):.1f}" for px, py in points)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
    axis = _TOP + max(1, len(series)) * _PANEL - 4
    for tick in _ticks(x0, x1, 6):
        out.append(
            f'<text x="{sx(tick):.1f}" y="{axis}" text-anchor="middle">{_label(tick)}</text>'
        )
    out.append(
        f'<text x="{_LEFT + plot_width / 2}" y="{axis + 22}" text-anchor="middle">'
        f"{escape(x)} (virtual seconds)</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"
