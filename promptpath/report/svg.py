"""The waterfall and the token timeline as SVG, drawn from the report object (``--json``'s).

Pure: a dict in, markup out; nothing re-measured. One time axis per picture: every bar and
every tick is ``x0 + ms * scale``, so a stage's width is its duration to scale (a 0.01 ms
stage is a sliver, not a minimum-width block that would claim time not spent). The same
figures go inline into the HTML report and, as one image, into ``--svg FILE``.

Every element a test (or a reader's tool) may want to measure carries ``data-*``
attributes with the JSON value it was drawn from.
"""

from __future__ import annotations

import itertools
import math
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from promptpath.core.textsafe import visible_xml
from promptpath.core.verdict import Tone, tone_of
from promptpath.report.labels import STAGE_LABELS

#: Colours per stage, the terminal's hues in print-safe shades.
STAGE_FILL = {
    "proxy_dns": "#1b9aaa",
    "proxy_connect": "#3366cc",
    "proxy_tls": "#aa3399",
    "tunnel": "#5588ee",
    "dns": "#1b9aaa",
    "connect": "#3366cc",
    "tls": "#aa3399",
    "quic_handshake": "#aa3399",
    "request": "#777777",
    "wait": "#d4a000",
    "first_token": "#cc3333",
    "streaming": "#2e9e44",
}
#: The first-token bar in the verdict's colour: the wait a user felt, judged.
FIRST_TOKEN_FILL: dict[Tone, str] = {"ok": "#5b8c2a", "warn": "#e07b00", "fail": "#cc3333"}
#: The verdict line's colour in the image, by its tone.
VERDICT_FILL: dict[Tone, str] = {"ok": "#2e7d32", "warn": "#8a6d00", "fail": "#cc3333"}
ARRIVAL = "#2e9e44"
COALESCED = "#e07b00"
SENT = "#3366cc"

WIDTH = 960
LABEL_W = 150  # stage names
MS_W = 80  # their durations
PLOT_X = LABEL_W + MS_W
PLOT_W = WIDTH - PLOT_X - 20
ROW_H = 20
BAR_H = 14
FONT = "font-family='DejaVu Sans, Arial, sans-serif'"
#: The verdict line wraps at this many columns (12 px DejaVu Sans: ~6.5 px a column; a
#: wide CJK character takes two).
VERDICT_CHARS = 135


@dataclass(frozen=True, slots=True)
class Axis:
    """Milliseconds on a horizontal pixel axis shared by every figure of one picture."""

    total_ms: float

    @property
    def scale(self) -> float:
        return PLOT_W / self.total_ms

    def x(self, ms: float) -> float:
        return PLOT_X + max(0.0, ms) * self.scale


def axis_end(bodies: Sequence[Mapping[str, Any]]) -> float:
    """The axis every body fits on: its last stage, its close, its error, at least 1 ms."""
    ends = [1.0]
    for body in bodies:
        ends += [float(s["end"]) for s in body.get("spans_ms") or []]
        closed = (body.get("stream") or {}).get("closed_ms")
        if isinstance(closed, (int, float)):
            ends.append(float(closed))
        error = body.get("error") or {}
        if isinstance(error.get("at_ms"), (int, float)):
            ends.append(float(error["at_ms"]))
        arrivals = ((body.get("tokens") or {}).get("arrivals") or {}).get("at_ms") or []
        ends += [float(a) for a in arrivals[-1:]]
    return max(ends)


def num(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _columns(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def wrap(text: str, columns: int) -> list[str]:
    """``text`` in rows of at most ``columns`` columns, broken at spaces where it can be
    (one ``<text>`` never wraps; a word longer than a row is cut)."""
    rows: list[str] = []
    row = ""
    for word in text.split(" "):
        candidate = f"{row} {word}" if row else word
        if _columns(candidate) <= columns:
            row = candidate
            continue
        if row:
            rows.append(row)
        row = ""
        for char in word:
            if _columns(row + char) > columns:
                rows.append(row)
                row = ""
            row += char
    if row:
        rows.append(row)
    return rows


def label(x: float, y: float, text: str, extra: str = "", size: int = 12) -> str:
    """A line of text; ``extra`` holds more attributes (never a second font-size)."""
    return (
        f"<text x='{num(x)}' y='{num(y)}' {FONT} font-size='{size}'{extra}>"
        f"{escape(visible_xml(text))}</text>"
    )


def _ticks(axis: Axis, top: float, bottom: float) -> list[str]:
    """Gridlines at a 1-2-5 step, about six of them, labelled in ms (the unit said once,
    left of the first)."""
    raw = axis.total_ms / 6
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    out = [
        f"<text class='axis-unit' x='{num(PLOT_X - 12)}' y='{num(top - 4)}' {FONT}"
        " font-size='10' fill='#666666' text-anchor='end'>time, ms</text>"
    ]
    t = 0.0
    while t <= axis.total_ms + 1e-9:
        x = axis.x(t)
        out.append(
            f"<line x1='{num(x)}' y1='{num(top)}' x2='{num(x)}' y2='{num(bottom)}'"
            " stroke='#dddddd' stroke-width='1'/>"
        )
        out.append(label(x - 8, top - 4, f"{t:g}", " fill='#666666'", size=10))
        t += step
    return out


def waterfall(body: Mapping[str, Any], axis: Axis, y: float, title: str = "") -> tuple[str, float]:
    """One run's stages as bars on ``axis``; (markup, height)."""
    parts: list[str] = []
    spans = body.get("spans_ms") or []
    top = y + (18 if title else 0) + 14
    if title:
        parts.append(label(4, y + 12, title, " font-weight='bold'"))
    bottom = top + max(1, len(spans)) * ROW_H
    parts += _ticks(axis, top, bottom)
    cut = (body.get("error") or {}).get("cut_stage")
    tone = tone_of(str(body.get("headline") or ""))
    for row, span in enumerate(spans):
        key = str(span["stage"])
        start, end = float(span["start"]), float(span["end"])
        ry = top + row * ROW_H
        name = STAGE_LABELS.get(key, key) + (" (cut)" if key == cut else "")
        parts.append(label(4, ry + 14, name))
        parts.append(label(PLOT_X - 8, ry + 14, f"{end - start:.1f} ms", " text-anchor='end'"))
        parts.append(
            f"<rect class='stage' data-stage={quoteattr(key)} data-ms='{num(end - start)}'"
            f" x='{num(axis.x(start))}' y='{num(ry + 3)}' width='{num((end - start) * axis.scale)}'"
            f" height='{BAR_H}' fill='{_fill(key, tone)}'/>"
        )
    if not spans:
        parts.append(label(PLOT_X, top + 14, "no stage completed", " fill='#cc3333'"))
    parts += _output_mark(body, axis, top, bottom)
    return "\n".join(parts), bottom - y + 6


def _fill(stage: str, tone: Tone) -> str:
    if stage == "first_token":
        return FIRST_TOKEN_FILL[tone]
    return STAGE_FILL.get(stage, "#777777")


def _output_mark(body: Mapping[str, Any], axis: Axis, top: float, bottom: float) -> list[str]:
    """A dashed line at the answer's first text when other content (reasoning, a tool
    call) came before it: the first token and what a user first sees are then apart."""
    output = body.get("first_output_ms") or {}
    at, after = output.get("from_start"), output.get("after")
    if not isinstance(at, (int, float)) or not after:
        return []
    x = axis.x(float(at))
    return [
        f"<line class='first-output' data-ms='{num(float(at))}' x1='{num(x)}' y1='{num(top)}'"
        f" x2='{num(x)}' y2='{num(bottom)}' stroke='#1e5e2e' stroke-dasharray='4 3'"
        " stroke-width='1.5'/>",
        label(x + 3, bottom - 4, "first output", " fill='#1e5e2e'", size=10),
    ]


def token_timeline(body: Mapping[str, Any], axis: Axis, y: float) -> tuple[str, float]:
    """Each content event's arrival as a tick (coalesced ones orange), the gap before it as
    a bar's height, and with the reference endpoint's stamps its send time joined to the
    arrival by a line: a hop that holds events shows as the lines slanting."""
    tokens = body.get("tokens") or {}
    arrivals = tokens.get("arrivals") or {}
    at = [float(a) for a in arrivals.get("at_ms") or []]
    sent = arrivals.get("server_sent_ms")
    coalesced = set(arrivals.get("path_coalesced") or [])
    parts = [label(4, y + 12, "token timeline", " font-weight='bold'")]
    gaps = [b - a for a, b in itertools.pairwise(at)]
    gap_h = 60.0
    top = y + 32
    row_sent = top + gap_h + 10
    row_arrival = row_sent + (30 if sent else 0)
    bottom = row_arrival + 16
    parts += _ticks(axis, top, bottom)
    longest = max(gaps, default=0.0) or 1.0
    parts.append(label(4, top + 12, f"gaps (max {longest:.1f} ms)", " fill='#666666'"))
    for i, gap in enumerate(gaps, start=1):
        h = gap / longest * gap_h
        parts.append(
            f"<rect class='gap' data-ms='{num(gap)}' x='{num(axis.x(at[i]) - 1)}'"
            f" y='{num(top + gap_h - h)}' width='2' height='{num(h)}' fill='#999999'/>"
        )
    if isinstance(sent, list) and len(sent) == len(at):
        parts.append(label(4, row_sent + 12, "sent by the server", " fill='#666666'"))
        for s_ms, a_ms in zip(sent, at, strict=True):
            parts.append(
                f"<line class='held' x1='{num(axis.x(float(s_ms)))}' y1='{num(row_sent + 14)}'"
                f" x2='{num(axis.x(a_ms))}' y2='{num(row_arrival)}' stroke='{SENT}'"
                " stroke-opacity='0.5' stroke-width='1'/>"
            )
    parts.append(label(4, row_arrival + 12, f"arrived ({len(at)} events)", " fill='#666666'"))
    for i, a_ms in enumerate(at):
        colour = COALESCED if i in coalesced else ARRIVAL
        parts.append(
            f"<rect class='arrival{' coalesced' if i in coalesced else ''}' data-ms='{num(a_ms)}'"
            f" x='{num(axis.x(a_ms) - 0.75)}' y='{num(row_arrival)}' width='1.5' height='14'"
            f" fill='{colour}'/>"
        )
    if not at:
        parts.append(label(PLOT_X, row_arrival + 12, "no content event arrived", " fill='#cc3333'"))
    omitted = int(arrivals.get("omitted") or 0)
    if omitted:
        parts.append(label(PLOT_X, bottom + 12, f"{omitted} later events not drawn"))
        bottom += 16
    return "\n".join(parts), bottom - y + 6


def document(figures: Sequence[str], height: float, title: str) -> str:
    return (
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{num(height)}'"
        f" viewBox='0 0 {WIDTH} {num(height)}' role='img'>\n"
        f"<title>{escape(visible_xml(title))}</title>\n"
        f"<rect width='100%' height='100%' fill='#ffffff'/>\n" + "\n".join(figures) + "\n</svg>\n"
    )


def target_of(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The target object of a run, series (whose ``target`` is the URL alone) or compare."""
    target = body.get("target")
    if isinstance(target, str):
        return {"url": target}
    if target is None and body.get("results"):
        return target_of(body["results"][0])
    return target if isinstance(target, Mapping) else {}


def runs_of(body: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The run bodies a report draws, with their titles: a run (and its warm twin), the
    two median runs of a compare, or a series' median-TTFT run."""
    schema = str(body.get("schema", ""))
    if schema.startswith("promptpath.compare"):
        out = []
        for result in body.get("results") or []:
            out.append((f"{result.get('http_version') or '?'} (median run)", result))
        return out
    if schema.startswith("promptpath.series"):
        runs = [r for r in body.get("runs") or [] if r.get("ttft_ms", {}).get("from_start")]
        if not runs:
            runs = list(body.get("runs") or [])[:1]
        runs.sort(key=lambda r: r.get("ttft_ms", {}).get("from_start") or 0.0)
        return [("median-TTFT run", runs[len(runs) // 2])] if runs else []
    out = [("cold" if body.get("warm") else "", body)]
    if body.get("warm"):
        out.append(("warm (same axis)", body["warm"]))
    return out


def render_svg(body: Mapping[str, Any]) -> str:
    """``--svg``: every waterfall of the report on one axis, then the first run's tokens."""
    runs = runs_of(body)
    axis = Axis(axis_end([run for _title, run in runs]))
    figures: list[str] = []
    y = 8.0
    target = target_of(body).get("url", "")
    figures.append(label(4, y + 12, f"promptpath → {target}", " font-weight='bold'"))
    y += 22
    line = str(body.get("headline") or (runs[0][1].get("headline") if runs else "") or "")
    # What is wrong comes first in the picture too, wrapped: one <text> does not wrap.
    fill = VERDICT_FILL[tone_of(line)]
    for row in wrap(visible_xml(line), VERDICT_CHARS):
        figures.append(label(4, y + 12, row, f" class='verdict' fill='{fill}'"))
        y += 16
    y += 6
    for title, run in runs:
        markup, height = waterfall(run, axis, y, title)
        figures.append(markup)
        y += height
    if runs:
        markup, height = token_timeline(runs[0][1], axis, y)
        figures.append(markup)
        y += height
    title = f"{line} (promptpath → {target})" if line else f"promptpath report: {target}"
    return document(figures, y + 8, title)
