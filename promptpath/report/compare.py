"""Reporting ``run --compare-http``: both waterfalls on one time axis, then the differences.

Each run's offsets are from its own t0, so the two waterfalls start together and a bar
that ends later on the shared axis really took longer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from promptpath.core.compare import (
    SAMPLES_PER_PROTOCOL,
    Difference,
    differences,
    differences_json,
    summary,
)
from promptpath.core.timeline import Timeline
from promptpath.report.terminal import STAGE_STYLE, bar, stage_spans
from promptpath.tracer.orchestrator import TraceResult

COMPARE_SCHEMA = "promptpath.compare/1"


def spans(timeline: Timeline) -> list[tuple[str, str, str, float, float]]:
    """(label, key, style, start_ms, end_ms) of every stage that happened, from t0."""
    return [
        (label, key, STAGE_STYLE.get(key, "white"), start, end)
        for label, key, start, end in stage_spans(timeline)
    ]


def _label(result: TraceResult) -> str:
    tl = result.timeline
    return tl.http_version or {"2": "HTTP/2", "3": "HTTP/3"}.get(result.options.http, "?")


def joint_waterfall(results: Sequence[TraceResult], width: int) -> Table:
    """One table, one axis: each run's stages in turn."""
    per_run = [spans(r.timeline) for r in results]
    ends = [end for rows in per_run for *_x, end in rows]
    ends += [
        (r.timeline.closed_ns - r.timeline.t0_ns) / 1e6
        for r in results
        if r.timeline.closed_ns is not None
    ]
    total = max([*ends, 1.0])
    bar_width = max(10, width - 42)
    table = Table(show_edge=False, box=None, pad_edge=False)
    table.add_column("run", no_wrap=True)
    table.add_column("stage", no_wrap=True)
    table.add_column("ms", justify="right", no_wrap=True)
    table.add_column(f"0 … {total:.0f} ms", no_wrap=True)
    for i, (result, rows) in enumerate(zip(results, per_run, strict=True)):
        if i:
            table.add_row("", "", "", "")
        name = _label(result)
        if not rows:
            table.add_row(name, "(no stage completed)", "", "")
        for j, (label, _key, style, start, end) in enumerate(rows):
            cells = bar(start, end, total, bar_width)
            cells.stylize(style)
            table.add_row(name if j == 0 else "", label, f"{end - start:.1f}", cells)
    return table


def _cell(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "round trips":
        return f"{value:.0f}"
    return f"{value:.1f}"


def differences_table(rows: list[Difference], names: tuple[str, str]) -> Table:
    """The metrics side by side. In a narrow terminal the metric names and the verdict
    wrap; the numbers and their headers never do (rich cut "HTTP/2" to "HTT…" when every
    column was no_wrap and the values were wide)."""
    table = Table(show_edge=False, box=None, pad_edge=False)
    table.add_column("metric")
    for header in (*names, "Δ", "noise ±"):
        table.add_column(header, justify="right", no_wrap=True, min_width=len(header))
    table.add_column("better")
    verdict = {"a": names[0], "b": names[1], "same": "same (noise)", None: ""}
    for d in rows:
        delta = d.delta
        better = verdict[d.better]
        if better and not d.measured:
            better += " (expected)"
        table.add_row(
            d.label if d.unit != "ms" else f"{d.label} (ms)",
            _cell(d.a, d.unit),
            _cell(d.b, d.unit),
            "—" if delta is None else f"{delta:+.1f}",
            "" if d.noise_floor is None or not d.measured else f"{d.noise_floor:.1f}",
            better,
        )
    return table


def render_compare(console: Console, results: Sequence[TraceResult]) -> None:
    """The terminal report for a two-run comparison (HTTP/2 first, HTTP/3 second)."""
    a, b = results[0], results[1]
    names = (_label(a), _label(b))
    console.print(
        Text.assemble(
            ("promptpath ", "bold"),
            f"→ {a.options.target.url}  {names[0]} vs {names[1]}, fresh connections each",
        )
    )
    console.print(joint_waterfall(results, console.width))
    for result, name in zip(results, names, strict=True):
        if result.timeline.error is not None:
            err = result.timeline.error
            console.print(Text(f"{name} FAILED in {err.stage}: {err.message}", style="red"))
    rows = differences(a.timeline, b.timeline)
    console.print()
    console.print(differences_table(rows, names))
    for line in summary(rows, names, (a.timeline.error, b.timeline.error)):
        console.print(Text("→ " + line))


def compare_json(
    results: Sequence[TraceResult], *, exit_codes: Sequence[int] | None = None
) -> dict[str, Any]:
    """``{"schema", "ok", "samples_per_protocol", "results": [h2 run, h3 run], "differences":
    {...}, "summary": [...]}``, as promptpath/report/compare-schema.json describes it.

    Each run object is exactly what ``promptpath.report.json.result_json`` makes for a
    single run; ``exit_codes`` defaults to each run's own (0 when it succeeded).
    """
    from promptpath.report.json import result_json

    if exit_codes is None:
        exit_codes = [0 if r.exc is None else int(r.exc.exit_code) for r in results]
    runs = [result_json(r, exit_code=code) for r, code in zip(results, exit_codes, strict=True)]
    for run, result in zip(runs, results, strict=True):
        quic = result.timeline.quic
        run.setdefault("quic", None if quic is None else asdict(quic))
    rows = differences(results[0].timeline, results[1].timeline)
    names = (_label(results[0]), _label(results[1]))
    return {
        "schema": COMPARE_SCHEMA,
        "ok": all(code == 0 for code in exit_codes),
        "samples_per_protocol": SAMPLES_PER_PROTOCOL,
        "results": runs,
        "differences": differences_json(rows),
        "summary": summary(rows, names, (results[0].timeline.error, results[1].timeline.error)),
    }
