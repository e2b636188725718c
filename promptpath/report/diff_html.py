"""`diff --html FILE`: the diff as one self-contained page. Pure: the ``promptpath.diff/1``
object in, markup out.

The headline, the metrics table with each change coloured by its verdict, the facts that
changed, then each side's median-TTFT run drawn as a waterfall and a token timeline on
**one** time axis (report/svg.py's figures), the stages that changed outlined on the after
side. As report/html.py's page: no script runs, nothing is fetched (a CSP forbids it), every
string from a document escaped with its control characters visible, the object itself in a
JSON data block.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from promptpath.report import svg
from promptpath.report.html import t
from promptpath.report.reproduce import reproduction

__all__ = ["render_diff_html"]

_CSS = """
body { font: 14px/1.4 'DejaVu Sans', Arial, sans-serif; color: #222; margin: 24px;
 max-width: 1000px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 24px 0 8px; }
.sub { color: #555; } .verdict { padding: 8px 12px; border-radius: 4px; font-weight: bold; }
.same { background: #e6f4ea; color: #1e5e2e; } .regressed-banner { background: #fde8e8;
 color: #8a1c1c; } .changed-banner { background: #fff4d6; color: #6b5200; }
table { border-collapse: collapse; margin: 4px 0; } td, th { padding: 2px 10px 2px 0;
 text-align: left; vertical-align: top; } th { color: #555; font-weight: normal; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.regressed td { background: #fde8e8; color: #8a1c1c; font-weight: bold; }
tr.improved td { background: #e6f4ea; color: #1e5e2e; font-weight: bold; }
tr.unknown td { color: #777; } tr.warn td { background: #fff4d6; }
.note { color: #555; } svg { max-width: 100%; height: auto; } pre { background: #f6f6f6;
 padding: 8px; white-space: pre-wrap; word-break: break-all; }
"""
#: Outline drawn around an after-side stage that changed.
_CHANGED = {"regressed": "#cc0000", "improved": "#1e7d32"}


def _n(value: object, digits: int = 1) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:.{digits}f}"
    return "—"


def _metric_rows(metrics: Sequence[Mapping[str, Any]]) -> str:
    head = ("metric", "unit", "n", "before p50", "after p50", "change", "interval", "p adj.",
            "floor", "verdict", "why")  # fmt: skip
    out = ["<table class='metrics'><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    for m in metrics:
        digits = 3 if m.get("unit") == "share" else 1
        ci = m.get("delta_ci")
        interval = f"{_n(ci[0], digits)} … {_n(ci[1], digits)}" if isinstance(ci, list) else ""
        p = m.get("p_adjusted")
        cells = [
            (t(m.get("label")), False),
            (t(m.get("unit")), False),
            (f"{m.get('n_before')}/{m.get('n_after')}", True),
            (_n(m.get("before_p50"), digits), True),
            (_n(m.get("after_p50"), digits), True),
            (_n(m.get("delta"), digits), True),
            (interval, True),
            (f"{p:.2g}" if isinstance(p, int | float) else "", True),
            (_n(m.get("floor"), digits), True),
            (t(m.get("verdict")), False),
            (t(m.get("reason")), False),
        ]
        row = "".join(f"<td{' class=n' if num else ''}>{text}</td>" for text, num in cells)
        verdict = t(m.get("verdict"))
        out.append(f"<tr class='{verdict}' data-metric='{t(m.get('name'))}'>{row}</tr>")
    out.append("</table>")
    return "".join(out)


def _fact_rows(facts: Sequence[Mapping[str, Any]]) -> str:
    if not facts:
        return "<p class='note'>No fact changed.</p>"
    out = ["<table class='facts'><tr><th>fact</th><th>before</th><th>after</th><th>note</th></tr>"]
    for fact in facts:
        before = ", ".join(str(v) for v in fact.get("before") or [])
        after = ", ".join(str(v) for v in fact.get("after") or [])
        out.append(
            f"<tr class='{t(fact.get('severity'))}' data-fact='{t(fact.get('name'))}'>"
            f"<td>{t(fact.get('label'))}</td><td>{t(before)}</td><td>{t(after)}</td>"
            f"<td>{t(fact.get('note'))}</td></tr>"
        )
    out.append("</table>")
    return "".join(out)


def _outlines(run: Mapping[str, Any], axis: svg.Axis, y: float, changed: Mapping[str, str]) -> str:
    """Rectangles around the after run's stages that changed (rows as svg.waterfall lays
    them out: a title row, then one row per span)."""
    top = y + 18 + 14
    parts = []
    for row, span in enumerate(run.get("spans_ms") or []):
        verdict = changed.get(str(span.get("stage")))
        if verdict is None:
            continue
        start, end = float(span["start"]), float(span["end"])
        ry = top + row * svg.ROW_H
        parts.append(
            f"<rect class='changed' data-stage='{t(span.get('stage'))}' data-verdict='{verdict}'"
            f" x='{svg.num(axis.x(start) - 2)}' y='{svg.num(ry + 1)}'"
            f" width='{svg.num((end - start) * axis.scale + 4)}' height='{svg.BAR_H + 4}'"
            f" fill='none' stroke='{_CHANGED[verdict]}' stroke-width='2'/>"
        )
    return "\n".join(parts)


def _figure(body: Mapping[str, Any]) -> str:
    shown = body.get("shown") or {}
    runs = [(side, shown.get(side)) for side in ("before", "after")]
    drawn = [(side, run) for side, run in runs if isinstance(run, Mapping)]
    if not drawn:
        return "<p class='note'>No run finished on either side: nothing to draw.</p>"
    changed = {
        str(m["name"]): str(m["verdict"])
        for m in body.get("metrics") or []
        if m.get("verdict") in _CHANGED
    }
    axis = svg.Axis(svg.axis_end([run for _side, run in drawn]))
    figures: list[str] = []
    y = 8.0
    for side, run in drawn:
        count = (body.get(side) or {}).get("runs")
        title = f"{side}: median-TTFT run of {count}" if count else side
        markup, height = svg.waterfall(run, axis, y, title)
        figures.append(markup)
        if side == "after":
            figures.append(_outlines(run, axis, y, changed))
        y += height
    for side, run in drawn:
        figures.append(svg.label(4, y + 12, f"{side}:", " font-weight='bold'"))
        markup, height = svg.token_timeline(run, axis, y + 14)
        figures.append(markup)
        y += height + 14
    missing = [side for side, run in runs if not isinstance(run, Mapping)]
    note = "".join(f"<p class='note'>{side}: every run failed, none drawn.</p>" for side in missing)
    return svg.document(figures, y + 8, "before and after on one time axis") + note


def render_diff_html(body: Mapping[str, Any], *, command: Sequence[str] = ()) -> str:
    """The whole page for a ``promptpath.diff/1`` object."""
    before, after = body.get("before") or {}, body.get("after") or {}
    banner = (
        "regressed-banner"
        if body.get("exit_code")
        else "changed-banner"
        if body.get("facts")
        or any(m.get("verdict") == "improved" for m in body.get("metrics") or [])
        else "same"
    )
    sides = " → ".join(
        f"{t(s.get('source'))}{' [' + t(s.get('range')) + ' UTC]' if s.get('range') else ''}"
        f" ({t(s.get('kind'))}, {t(s.get('runs'))} runs)"
        for s in (before, after)
    )
    sections = [
        f"<p class='verdict {banner}'>{t(body.get('headline'))}</p>",
        "<h2>Metrics</h2>"
        + _metric_rows([*(body.get("metrics") or []), body.get("error_rate") or {}]),
        "".join(f"<p class='note'>{t(n)}</p>" for n in body.get("notes") or []),
        "<h2>Facts</h2>" + _fact_rows(body.get("facts") or []),
        "<h2>Before and after, one scale</h2>" + _figure(body),
    ]
    if command:
        sections.append(f"<h2>Reproduce</h2><pre>{t(reproduction(command).line)}</pre>")
    data = json.dumps(body, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e")
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none';"
        " style-src 'unsafe-inline'; img-src data:\">"
        f"<title>promptpath diff: {sides}</title><style>{_CSS}</style></head><body>"
        f"<h1>promptpath diff</h1><p class='sub'>{sides}</p>"
        + "\n".join(sections)
        + f"<script type='application/json' id='promptpath-report'>{data}</script>"
        + "</body></html>\n"
    )
