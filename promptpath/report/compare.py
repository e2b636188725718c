"""Reporting ``run --compare-http``: both waterfalls on one time axis, then the differences.

Each protocol ran several times; the waterfalls show one run of each (the median), the
differences all of them. Each run's offsets are from its own t0, so the two waterfalls
start together and a bar that ends later on the shared axis really took longer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from promptpath.core.compare import (
    Difference,
    differences,
    differences_json,
    is_loopback,
    shown,
    summary,
)
from promptpath.core.timeline import ErrorInfo, Timeline
from promptpath.options import display_url
from promptpath.report.terminal import STAGE_STYLE, bar, stage_spans
from promptpath.result import TraceResult

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
    """The metrics side by side (medians), measured rows first. In a narrow terminal the
    metric names and the verdict wrap; the numbers and their headers never do (rich cut
    "HTTP/2" to "HTT…" when every column was no_wrap and the values were wide)."""
    table = Table(show_edge=False, box=None, pad_edge=False)
    table.add_column("metric")
    for header in (*names, "Δ", "noise ±"):
        table.add_column(header, justify="right", no_wrap=True, min_width=len(header))
    table.add_column("better")
    verdict = {"a": names[0], "b": names[1], "same": "same (noise)", None: ""}
    for d in rows:
        delta, floor = shown(d)
        better = "same (client-side)" if d.client_side else verdict[d.better]
        if not d.measured:
            floor = ""  # an expectation has no noise
            if d.better in ("a", "b"):
                better += " (expected)"
        table.add_row(
            d.label if d.unit != "ms" else f"{d.label} (ms)",
            _cell(d.a, d.unit),
            _cell(d.b, d.unit),
            delta,
            floor,
            better,
        )
    return table


def sides(results: Sequence[TraceResult]) -> tuple[list[TraceResult], list[TraceResult]]:
    """The HTTP/2 runs and the HTTP/3 runs, each in the order they ran."""
    return (
        [r for r in results if r.options.http != "3"],
        [r for r in results if r.options.http == "3"],
    )


def representative(runs: Sequence[TraceResult]) -> TraceResult:
    """The run a waterfall and the JSON's ``results`` show for one protocol: the first
    that failed (a failure must be seen), else the one with the median TTFT."""
    failed = [r for r in runs if r.timeline.error is not None]
    if failed:
        return failed[0]

    def ttft(result: TraceResult) -> float:
        t = result.timeline.milestones.get("ttft")
        return float("inf") if t is None else float(t - result.timeline.t0_ns)

    ordered = sorted(runs, key=ttft)
    return ordered[(len(ordered) - 1) // 2]


def _first_error(runs: Sequence[TraceResult]) -> ErrorInfo | None:
    return next((r.timeline.error for r in runs if r.timeline.error is not None), None)


def _compared(
    results: Sequence[TraceResult],
) -> tuple[tuple[TraceResult, TraceResult], tuple[str, str], list[Difference], list[str]]:
    """Both sides' shown runs, their names, the differences and the summary."""
    runs_a, runs_b = sides(results)
    shown_runs = (representative(runs_a), representative(runs_b))
    names = (_label(shown_runs[0]), _label(shown_runs[1]))
    rows = differences([r.timeline for r in runs_a], [r.timeline for r in runs_b])
    lines = summary(
        rows, names, (_first_error(runs_a), _first_error(runs_b)), runs=(len(runs_a), len(runs_b))
    )
    return shown_runs, names, rows, lines


def render_compare(console: Console, results: Sequence[TraceResult]) -> None:
    """The terminal report for a comparison: every run of both protocols in ``results``
    (HTTP/2 runs have ``options.http`` "2", HTTP/3 runs "3"), in any order. Every line
    redacted and its control characters spelled out (report/sanitise.py)."""
    from promptpath.report.redact import Redactor
    from promptpath.report.sanitise import sanitised

    with sanitised(console, Redactor.for_options(results[0].options)):
        _render_compare(console, results)


def _render_compare(console: Console, results: Sequence[TraceResult]) -> None:
    (a, b), names, rows, lines = _compared(results)
    runs_a, runs_b = sides(results)
    console.print(
        Text.assemble(
            ("promptpath ", "bold"),
            f"→ {display_url(a.options.target.url)}  {names[0]} vs {names[1]}, fresh connections"
            " each,"
            f" {len(runs_a)}+{len(runs_b)} runs (waterfalls: the median run of each)",
        )
    )
    console.print(joint_waterfall((a, b), console.width))
    for runs, name in ((runs_a, names[0]), (runs_b, names[1])):
        failed = [r for r in runs if r.timeline.error is not None]
        if failed:
            err = failed[0].timeline.error
            assert err is not None
            console.print(
                Text(
                    f"{name} FAILED in {err.stage}: {err.message}"
                    + (f" ({len(failed)} of {len(runs)} runs)" if len(runs) > 1 else ""),
                    style="red",
                )
            )
    console.print()
    console.print(differences_table(rows, names))
    for line in lines:
        console.print(Text("→ " + line))


def compare_json(
    results: Sequence[TraceResult], *, exit_codes: Sequence[int] | None = None
) -> dict[str, Any]:
    """``{"schema", "ok", "samples_per_protocol", "loopback", "results": [h2 run, h3 run],
    "differences": {...}, "summary": [...]}``, as promptpath/report/compare-schema.json
    describes it. ``results`` here: every run of both protocols; the JSON's ``results``
    are the run each side shows (see ``representative``), each exactly what
    ``promptpath.report.json.result_json`` makes for a single run. ``exit_codes`` (one per
    run, aligned with ``results``) defaults to each run's own (0 when it succeeded).
    """
    from promptpath.report.json import result_json

    if exit_codes is None:
        exit_codes = [0 if r.exc is None else int(r.exc.exit_code) for r in results]
    code_of = {id(r): code for r, code in zip(results, exit_codes, strict=True)}
    shown_runs, _names, rows, lines = _compared(results)
    runs = [result_json(r, exit_code=code_of[id(r)]) for r in shown_runs]
    for run, result in zip(runs, shown_runs, strict=True):
        quic = result.timeline.quic
        run.setdefault("quic", None if quic is None else asdict(quic))
    runs_a, runs_b = sides(results)
    from promptpath.report.redact import Redactor

    # The summary quotes each side's first error: cleaned as each run's object is.
    return Redactor.for_options(results[0].options).mapping(
        {
            "schema": COMPARE_SCHEMA,
            "ok": all(code == 0 for code in exit_codes),
            "samples_per_protocol": max(len(runs_a), len(runs_b)),
            "loopback": is_loopback([r.timeline for r in results]),
            "results": runs,
            "differences": differences_json(rows),
            "summary": lines,
        }
    )
