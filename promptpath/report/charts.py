"""A series' figures as SVG: the TTFT distribution and the concurrency curve. Pure.

Drawn from the series report object (``promptpath.series/1``): the per-run TTFTs it lists
and the aggregates it computed; nothing re-measured, no percentile recomputed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from promptpath.report.svg import label, num

W, H = 640, 220
LEFT, BOTTOM, TOP = 60, 40, 20


def _frame(title: str, parts: Sequence[str], height: int = H) -> str:
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{W}' height='{height}'"
        f" viewBox='0 0 {W} {height}' role='img'><title>{title}</title>"
        "<rect width='100%' height='100%' fill='#ffffff'/>" + "".join(parts) + "</svg>"
    )


def ttfts(body: Mapping[str, Any]) -> list[float]:
    """TTFT from start of every run that had a first token, in run order."""
    out = []
    for run in body.get("runs") or []:
        value = (run.get("ttft_ms") or {}).get("from_start")
        if isinstance(value, (int, float)):
            out.append(float(value))
    return out


#: The histogram's plot starts lower: its markers' labels sit above it, one row each.
HIST_TOP = 46
#: Wide enough for any character of a 12 px label (DejaVu Sans averages ~7 px).
CHAR_W = 7.5


def _ms_label(value: float, span: float) -> str:
    """A time on the histogram's axis, to 0.1 ms (0.01 ms when the runs lie within 1 ms):
    never rounded to whole ms, which made 4.5 and 5.0 ms both "5 ms"."""
    return f"{value:.{1 if span >= 1 else 2}f} ms"


def _marker_label(x: float, y: float, text: str) -> str:
    """A marker's label beside its line, on the side where it fits inside the image."""
    if x + 3 + len(text) * CHAR_W <= W - 2:
        return label(x + 3, y, text, " class='mark' fill='#cc3333'")
    return label(x - 3, y, text, " class='mark' fill='#cc3333' text-anchor='end'")


def histogram(values: Sequence[float], marks: Mapping[str, float]) -> str:
    """Counts of ``values`` in about ten equal bins, with ``marks`` (p50, p95...) as lines."""
    if not values:
        return _frame("TTFT distribution", [label(LEFT, H / 2, "no run had a first token")])
    lo, hi = min(values), max(values)
    bins = max(1, min(10, len(values)))
    width = (hi - lo) / bins or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width))] += 1
    top = HIST_TOP
    plot_w, plot_h = W - LEFT - 20, H - top - BOTTOM
    bar_w = plot_w / bins
    tallest = max(counts)
    parts = []
    for i, count in enumerate(counts):
        h = count / tallest * plot_h
        x = LEFT + i * bar_w
        parts.append(
            f"<rect class='bin' data-count='{count}' x='{num(x + 1)}' y='{num(top + plot_h - h)}'"
            f" width='{num(bar_w - 2)}' height='{num(h)}' fill='#3366cc'/>"
        )
        parts.append(label(x + bar_w / 2 - 4, top + plot_h - h - 3, str(count), "", size=10))
    span = hi - lo or 1.0
    for row, (name, value) in enumerate(marks.items()):
        x = LEFT + (value - lo) / span * plot_w
        parts.append(
            f"<line class='mark' data-ms='{num(value)}' x1='{num(x)}' y1='{top - 4}' x2='{num(x)}'"
            f" y2='{top + plot_h}' stroke='#cc3333' stroke-dasharray='4 3'/>"
        )
        # One row per marker above the plot: p50 and p95 close together stay readable.
        parts.append(_marker_label(x, 14 + 14 * row, f"{name} {_ms_label(value, hi - lo)}"))
    parts.append(label(LEFT, H - 18, _ms_label(lo, hi - lo), ""))
    parts.append(label(LEFT + plot_w, H - 18, _ms_label(hi, hi - lo), " text-anchor='end'"))
    parts.append(label(LEFT, H - 4, f"TTFT from start, {len(values)} runs", " fill='#666666'"))
    return _frame("TTFT distribution", parts)


def concurrency_curve(sweep: Sequence[Mapping[str, Any]], metric: str = "ttft_ms") -> str:
    """p50 and p95 of ``metric`` at each concurrency level of a sweep."""
    points: list[tuple[int, dict[str, float]]] = []
    for level in sweep:
        agg = (level.get("aggregate") or {}).get(metric) or {}
        marks = {k: float(agg[k]) for k in ("p50", "p95") if isinstance(agg.get(k), (int, float))}
        if "p50" in marks:
            points.append((int(level["concurrency"]), marks))
    if not points:
        return _frame("concurrency curve", [label(LEFT, H / 2, "no level had a first token")])
    plot_w, plot_h = W - LEFT - 20, H - TOP - BOTTOM
    top_ms = max(max(marks.values()) for _c, marks in points) or 1.0
    levels = [c for c, _marks in points]
    # Concurrency levels are usually a geometric sweep (1, 8, 64): a log axis spaces them.
    lo, hi = math.log(min(levels)), math.log(max(levels))

    def x(c: int) -> float:
        return LEFT + (0.5 if hi == lo else (math.log(c) - lo) / (hi - lo)) * plot_w

    def y(ms: float) -> float:
        return TOP + plot_h - ms / top_ms * plot_h

    parts = []
    for index, (key, colour) in enumerate((("p50", "#3366cc"), ("p95", "#cc3333")), start=1):
        pts = [(x(c), y(marks[key])) for c, marks in points if key in marks]
        if pts:
            path = " ".join(f"{num(px)},{num(py)}" for px, py in pts)
            parts.append(f"<polyline points='{path}' fill='none' stroke='{colour}'/>")
            parts += [
                f"<circle class='{key}' cx='{num(px)}' cy='{num(py)}' r='3' fill='{colour}'/>"
                for px, py in pts
            ]
            parts.append(label(W - 60, TOP + 12 * index, key, f" fill='{colour}'"))
    for c in levels:
        parts.append(label(x(c) - 4, H - 22, str(c), ""))
    parts.append(label(LEFT, H - 4, f"{metric} by concurrency (0 … {top_ms:.0f} ms)", ""))
    return _frame("concurrency curve", parts)
