"""A diff reported: the ``promptpath.diff/1`` JSON object (report/diff-schema.json) and the
terminal table. Reads a ``core.change.compose.Diff``; measures nothing.

Every string a document carried (fact values, a file name) is untrusted: the terminal
shows it through ``textsafe.visible`` inside rich ``Text`` (no markup is interpreted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from promptpath.core.change.compose import Diff, Side
from promptpath.core.change.facts import FactChange
from promptpath.core.change.headline import signed
from promptpath.core.change.metrics import metric
from promptpath.core.change.samples import MetricChange
from promptpath.core.exitcodes import ExitCode
from promptpath.core.textsafe import visible

__all__ = ["SCHEMA_VERSION", "diff_exit_code", "diff_json", "render_diff"]

SCHEMA_VERSION = "promptpath.diff/1"
_STYLE = {"regressed": "bold red", "improved": "green", "unchanged": "", "unknown": "dim"}


def diff_exit_code(diff: Diff) -> int:
    """1 when a metric regressed beyond its noise (--fail-on's finding code), else 0."""
    return int(ExitCode.FINDING if diff.regressed else ExitCode.OK)


def _num(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _metric_json(change: MetricChange) -> dict[str, Any]:
    where = metric(change.name).where if change.name != "error_rate" else "error"
    return {
        "name": change.name,
        "label": change.label,
        "unit": change.unit,
        "where": where,
        "higher_is_worse": change.higher_is_worse,
        "n_before": change.n_before,
        "n_after": change.n_after,
        "before_p50": _num(change.before_p50),
        "after_p50": _num(change.after_p50),
        "delta": _num(change.delta),
        "delta_ci": None if change.delta_ci is None else [_num(v) for v in change.delta_ci],
        "p_value": _num(change.p_value),
        "p_adjusted": _num(change.p_adjusted),
        "method": change.method,
        "floor": _num(change.floor),
        "verdict": change.verdict,
        "reason": change.reason,
    }


def _fact_json(fact: FactChange) -> dict[str, Any]:
    return {
        "name": fact.name,
        "label": fact.label,
        "before": list(fact.before),
        "after": list(fact.after),
        "severity": fact.severity,
        "note": fact.note,
    }


def _side_json(side: Side) -> dict[str, Any]:
    return {
        "source": side.source,
        "kind": side.kind,
        "runs": side.runs,
        "failed": side.failed,
        "range": side.range,
    }


def diff_json(diff: Diff, shown: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``promptpath.diff/1`` object. ``shown``: each side's median-TTFT run's
    waterfall and token arrivals, for the HTML page (optional)."""
    code = diff_exit_code(diff)
    body: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "ok": code == 0,
        "exit_code": code,
        "headline": diff.headline,
        "before": _side_json(diff.before),
        "after": _side_json(diff.after),
        "confidence": round(1.0 - diff.alpha, 6),
        "metrics": [_metric_json(m) for m in diff.metrics],
        "error_rate": _metric_json(diff.errors),
        "facts": [_fact_json(f) for f in diff.facts],
        "notes": list(diff.notes),
    }
    if shown is not None:
        body["shown"] = dict(shown)
    return body


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "share":
        return f"{value:.2f}"
    return f"{value:.1f}"


def _metrics_table(metrics: Sequence[MetricChange]) -> Table:
    """Metric × n, the two medians, the change, Holm-adjusted p, floor, verdict (the
    interval of the change is in --json: the table stays within 80 columns)."""
    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    for name, justify in (
        ("metric", "left"),
        ("n", "right"),
        ("before", "right"),
        ("after", "right"),
        ("change", "right"),
        ("p adj.", "right"),
        ("floor", "right"),
        ("verdict", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for m in metrics:
        delta = "—" if m.delta is None else signed(m.delta, m.unit).split(" ")[0]
        p = "" if m.p_adjusted is None else f"{m.p_adjusted:.2g}"
        unit = "" if m.unit == "share" else f" ({m.unit})"
        table.add_row(
            f"{m.label}{unit}",
            f"{m.n_before}/{m.n_after}",
            _value(m.before_p50, m.unit),
            _value(m.after_p50, m.unit),
            delta,
            p,
            _value(m.floor, m.unit) if m.floor is not None else "",
            Text(m.verdict, style=_STYLE[m.verdict]),
        )
    return table


def _facts_table(facts: Sequence[FactChange]) -> Table:
    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    for name in ("fact", "before", "after", "note"):
        table.add_column(name, overflow="fold")
    for fact in facts:
        style = "bold yellow" if fact.severity == "warn" else ""
        table.add_row(
            Text(fact.label, style=style),
            Text(visible(", ".join(fact.before))),
            Text(visible(", ".join(fact.after))),
            Text(fact.note, style="dim"),
        )
    return table


def _side_line(word: str, side: Side) -> Text:
    where = visible(side.source) + (f" [{side.range} UTC]" if side.range else "")
    failed = f", {side.failed} failed" if side.failed else ""
    return Text(f"{word}: {where} ({side.kind}, {side.runs} run{'s' * (side.runs != 1)}{failed})")


def render_diff(diff: Diff, console: Console) -> None:
    """The terminal report: the two sides, the metrics, the facts, the notes, and the
    headline last (one greppable line, as a run's verdict)."""
    console.print(_side_line("BEFORE", diff.before))
    console.print(_side_line("AFTER ", diff.after))
    console.print()
    console.print(_metrics_table([*diff.metrics, diff.errors]))
    if diff.facts:
        console.print()
        console.print(Text("Facts that changed", style="bold"))
        console.print(_facts_table(diff.facts))
    for note in diff.notes:
        console.print(Text(note, style="dim"))
    console.print()
    verdict = "REGRESSED" if diff.regressed else "CHANGED" if _changed(diff) else "SAME"
    style = "bold red" if diff.regressed else "bold"
    console.print(Text(f"{verdict}: ", style=style) + Text(visible(diff.headline)))


def _changed(diff: Diff) -> bool:
    return bool(diff.facts) or any(m.changed for m in diff.metrics) or diff.errors.changed
