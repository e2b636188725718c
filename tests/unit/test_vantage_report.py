"""`promptpath vantage`'s outputs, pure: the table, its JSON against the schema file, the
HTML page; label values from Prometheus shown escaped."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema

from promptpath.core.vantage.judge import judge
from promptpath.core.vantage.queries import Selection
from promptpath.core.vantage.table import Cell, Row, Table
from promptpath.report.vantage import Comparison, document, render_html, terminal

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "promptpath" / "report" / "vantage_schema.json").read_text()
)


def _found(*rows: Row) -> Comparison:
    stages = tuple(dict.fromkeys(s for r in rows for s in r.cells))
    table = Table(by="vantage", stages=stages, rows=rows)
    return Comparison(
        prometheus="http://127.0.0.1:9090",
        at="2026-12-06T21:00:00.000Z",
        selection=Selection(target="api", since_s=600),
        table=table,
        verdict=judge(table),
    )


def _row(name: str, runs: int = 10, failed: int = 0, **stages: tuple[float, float]) -> Row:
    cells = {s: Cell(p50_ms=a, p95_ms=b, runs=runs) for s, (a, b) in stages.items()}
    return Row(vantage=name, cells=cells, runs=runs, failed=failed, edges=(("FRA", runs),))


def test_failures_and_unjudged_stages_are_said_in_words() -> None:
    found = _found(
        _row("a", 20, failed=12, connect=(1.0, 2.0), tunnel=(3.0, 4.0)),
        _row("b", 20, connect=(1.0, 2.0)),
    )
    text = terminal(found)
    assert "a: 12 of 20 probes failed (60%; the others 0%)" in text
    assert "not judged (too few runs or vantages): tunnel" in text
    assert "a fails 60% of its probes" in text
    doc = document(found)
    jsonschema.validate(doc, SCHEMA)
    assert doc["failures"][0]["vantage"] == "a" and doc["standout"] is None


def test_a_hostile_label_value_is_escaped_in_every_output() -> None:
    found = _found(
        _row("\x1b]0;owned\x07<img src=x>", connect=(80.0, 81.0)),
        _row("b", connect=(1.0, 2.0)),
        _row("c", connect=(1.0, 2.0)),
    )
    text = terminal(found)
    assert "\x1b" not in text and "\x07" not in text
    page = render_html(found)
    assert "<img" not in page and "\x1b" not in page
    doc = document(found)
    jsonschema.validate(doc, SCHEMA)
    # JSON keeps the value as sent (a JSON string escapes it); readers escape it to show it.
    assert doc["standout"]["vantage"].startswith("\x1b]0;owned")
