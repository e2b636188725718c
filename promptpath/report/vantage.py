"""`promptpath vantage`'s outputs: the ``promptpath.vantage/1`` JSON object (its schema is
vantage_schema.json beside this file), the terminal table and the --html page.

Pure: the table and the verdict (core/vantage/) in, text out. Every label value came from
Prometheus, so from whoever wrote the series: escaped on the terminal (control and bidi
characters spelled out) and in HTML.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from promptpath.core.textsafe import visible
from promptpath.core.vantage.judge import Verdict
from promptpath.core.vantage.queries import Selection
from promptpath.core.vantage.table import Table

SCHEMA = "promptpath.vantage/1"
#: Longest label value shown in a terminal cell (the JSON has it whole).
_SHOWN = 24


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """What one `promptpath vantage` found: the question, the table, the verdict."""

    prometheus: str  # scheme://host:port, no credentials
    at: str  # UTC ISO 8601, the instant every query was evaluated at
    selection: Selection
    table: Table
    verdict: Verdict


def _r(value: float) -> float:
    return round(value, 3)


def document(found: Comparison) -> dict[str, Any]:
    """The ``promptpath.vantage/1`` object."""
    sel, table, verdict = found.selection, found.table, found.verdict
    rows = []
    for row in table.rows:
        share = row.failure_share
        rows.append(
            {
                "vantage": row.vantage,
                "runs": row.runs,
                "failed": row.failed,
                "failure_share": None if share is None else round(share, 4),
                "edge": row.edge,
                "edges": [{"edge": e, "samples": n} for e, n in row.edges],
                "stages": {
                    stage: {
                        "p50_ms": _r(cell.p50_ms),
                        "p95_ms": _r(cell.p95_ms),
                        "runs": cell.runs,
                        "series": cell.series,
                    }
                    for stage, cell in row.cells.items()
                },
            }
        )
    return {
        "schema": SCHEMA,
        "ok": True,
        "exit_code": 0,
        "prometheus": found.prometheus,
        "at": found.at,
        "since_s": sel.since_s,
        "by": sel.by,
        "target": sel.target,
        "module": sel.module,
        "stages": list(table.stages),
        "rows": rows,
        "standout": None
        if verdict.standout is None
        else {"vantage": verdict.standout, "stages": list(verdict.stages)},
        "calls": [
            {
                "vantage": c.vantage,
                "stage": c.stage,
                "p50_ms": _r(c.p50_ms),
                "others_p50_ms": _r(c.others_p50_ms),
                "others_p95_ms": _r(c.others_p95_ms),
                "floor_ms": _r(c.floor_ms),
                "excess_ms": _r(c.excess_ms),
            }
            for c in verdict.calls
        ],
        "failures": [
            {
                "vantage": f.vantage,
                "share": round(f.share, 4),
                "others_share": round(f.others_share, 4),
                "failed": f.failed,
                "runs": f.runs,
            }
            for f in verdict.failures
        ],
        "unjudged": list(verdict.unjudged),
        "summary": verdict.summary,
    }


def error_document(exit_code: int, error: Mapping[str, object]) -> dict[str, Any]:
    """The object --json prints when nothing could be compared."""
    return {"schema": SCHEMA, "ok": False, "exit_code": exit_code, "error": dict(error)}


def _shown(value: str) -> str:
    value = visible(value)
    return value if len(value) <= _SHOWN else value[: _SHOWN - 1] + "…"


def _heading(found: Comparison) -> str:
    sel = found.selection
    narrowed = "".join(
        f"; {what} {visible(value)}"
        for what, value in (("target", sel.target), ("module", sel.module))
        if value is not None
    )
    return (
        f"{sel.by} × stage, p50/p95 ms over the last {sel.range} (Prometheus"
        f" {found.prometheus}, at {found.at}{narrowed})"
    )


def terminal(found: Comparison) -> str:
    """The table as plain text: one row per vantage, a p50/p95 column per stage."""
    table, verdict = found.table, found.verdict
    called = {(c.vantage, c.stage) for c in verdict.calls}
    header = [table.by, "runs", "failed", "edge", *table.stages]
    lines = [header]
    for row in table.rows:
        share = row.failure_share
        cells = [
            _shown(row.vantage),
            str(row.runs),
            "-" if share is None else f"{share:.0%}",
            "-" if row.edge is None else _shown(row.edge),
        ]
        for stage in table.stages:
            cell = row.cells.get(stage)
            text = "-" if cell is None else f"{cell.p50_ms:.1f}/{cell.p95_ms:.1f}"
            cells.append(text + ("*" if (row.vantage, stage) in called else ""))
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    out = [_heading(found), ""]
    for line in lines:
        out.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip())
    out.append("")
    if verdict.calls:
        out.append("* beyond the others' p95 and the practical floor")
    out.append(visible(verdict.summary))
    for f in verdict.failures:
        out.append(
            f"{_shown(f.vantage)}: {f.failed} of {f.runs} probes failed ({f.share:.0%};"
            f" the others {f.others_share:.0%})"
        )
    if verdict.unjudged:
        out.append(f"not judged (too few runs or vantages): {', '.join(verdict.unjudged)}")
    return "\n".join(out) + "\n"


def render_html(found: Comparison) -> str:
    """A self-contained page: the same table, the cells that stand out marked."""
    table, verdict = found.table, found.verdict
    called = {(c.vantage, c.stage) for c in verdict.calls}
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for h in (table.by, "runs", "failed", "edge", *table.stages))
    body = []
    for row in table.rows:
        share = row.failure_share
        cells = [
            f"<th>{e(visible(row.vantage))}</th>",
            f"<td>{row.runs}</td>",
            f"<td>{'-' if share is None else f'{share:.0%}'}</td>",
            f"<td>{e(visible(row.edge or '-'))}</td>",
        ]
        for stage in table.stages:
            cell = row.cells.get(stage)
            mark = ' class="out"' if (row.vantage, stage) in called else ""
            text = "-" if cell is None else f"{cell.p50_ms:.1f} / {cell.p95_ms:.1f}"
            cells.append(f"<td{mark}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>promptpath vantage</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
        "th,td{border:1px solid #ccc;padding:.3em .6em;text-align:right}"
        "td.out{background:#fdd;font-weight:bold}</style></head><body>"
        f"<h1>promptpath vantage</h1><p>{e(_heading(found))}</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        f"<p><strong>{e(visible(verdict.summary))}</strong></p>"
        "<p>Cells: p50 / p95 in ms over the range; marked cells are beyond the others'"
        " p95 and the practical floor.</p></body></html>\n"
    )


__all__ = ["SCHEMA", "Comparison", "document", "error_document", "render_html", "terminal"]
