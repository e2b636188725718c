"""A series (--count, --concurrency) reported: one summary table on the terminal, and the
``promptpath.series/1`` JSON object (report/series_schema.json)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from promptpath.core.analysis import compute
from promptpath.core.exitcodes import ExitCode
from promptpath.core.series import (
    MIN_SAMPLES,
    MetricStats,
    SeriesPlan,
    SeriesSummary,
    json_key,
)
from promptpath.core.slo import SLOResult
from promptpath.core.stats import sparkline
from promptpath.core.verdict import wrong_first
from promptpath.options import display_url
from promptpath.report.json import result_json
from promptpath.result import TraceResult

SCHEMA_VERSION = "promptpath.series/1"

#: Table rows: metric short name → label.
_LABELS = {
    "dns": "DNS",
    "connect": "TCP connect",
    "tls": "TLS",
    "quic_handshake": "QUIC handshake",
    "request": "request",
    "wait": "wait (TTFB)",
    "ttft": "TTFT",
    "ttft_from_request": "TTFT from request",
    "ttft_network_adjusted": "TTFT less one RTT",
    "first_output": "first output",
    "itl_mean": "mean ITL",
    "gap_p99": "gap p99",
    "tokens_per_s": "tokens/s",
    "total": "total",
}
_COLUMNS = ("min", "p50", "p95", "p99", "max")
#: Up to this many runs, each gets a line of its own under the table.
PER_RUN_LINES_MAX = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class Level:
    """One concurrency level of a series: its runs (with their exit codes) summarised."""

    concurrency: int
    results: Sequence[TraceResult]
    codes: Sequence[int]
    summary: SeriesSummary
    slo: Sequence[SLOResult] = ()


def _stats_json(stats: MetricStats) -> dict[str, Any]:
    body: dict[str, Any] = {"n": stats.n}
    body.update({k: round(stats.stat(k), 3) for k in _COLUMNS})
    body["unit"] = stats.unit
    body["too_few_for"] = list(stats.too_few_for)
    return body


def _level_json(summary: SeriesSummary) -> dict[str, Any]:
    return {
        "aggregate": {json_key(k): _stats_json(v) for k, v in summary.aggregate.items()},
        "failures": dict(summary.failures),
        "error_rate": round(summary.error_rate, 6),
    }


def series_json(
    plan: SeriesPlan,
    levels: Sequence[Level],
    *,
    total: SeriesSummary,
    slo: Sequence[SLOResult] | None,
    exit_code: int,
) -> dict[str, Any]:
    """The ``promptpath.series/1`` object: every run's own object, then the aggregate."""
    first = levels[0].results[0]
    body: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "ok": exit_code == 0,
        "target": display_url(first.options.target.url),
        "plan": plan.as_dict(),
        "runs": [
            result_json(result, exit_code=code)
            for level in levels
            for result, code in zip(level.results, level.codes, strict=True)
        ],
    }
    body.update(_level_json(total))
    if slo is not None:
        body["slo"] = [r.as_dict() for r in slo]
    if len(plan.concurrency) > 1:
        body["sweep"] = [
            {"concurrency": level.concurrency, "runs": len(level.results)}
            | _level_json(level.summary)
            for level in levels
        ]
    body["headline"] = series_line(total, slo, exit_code)
    body["exit_code"] = exit_code
    return body


def summary_table(summary: SeriesSummary) -> Table:
    """Metric × n/min/p50/p95/p99/max over the runs that succeeded."""
    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    table.add_column("metric")
    table.add_column("unit")
    table.add_column("n", justify="right")
    for column in _COLUMNS:
        table.add_column(column, justify="right")
    for name, stats in summary.aggregate.items():
        cells = []
        for column in _COLUMNS:
            text = f"{stats.stat(column):.1f}"
            # A percentile this n cannot support is only the maximum again: dim it.
            cells.append(Text(text, style="dim") if column in stats.too_few_for else text)
        table.add_row(_LABELS[name], stats.unit, str(stats.n), *cells)
    return table


def thin_note(summary: SeriesSummary) -> str | None:
    """Which percentiles the number of runs is too small for, in one line."""
    thin = sorted(
        {q for stats in summary.aggregate.values() for q in stats.too_few_for},
        key=lambda q: MIN_SAMPLES[q],
    )
    if not thin:
        return None
    needs = ", ".join(f"{q} needs ≥{MIN_SAMPLES[q]}" for q in thin)
    return (
        f"too few runs for {', '.join(thin)} ({needs}, nearest rank): each is just the maximum"
        " (dimmed)"
    )


def _run_line(index: int, result: TraceResult, code: int) -> str:
    tl = result.timeline
    if tl.error is not None:
        return f"run {index + 1:>3}  exit {code}  FAILED in {tl.error.stage}: {tl.error.message}"
    metrics = compute(tl)
    ttft = metrics.milestones_ms.get("ttft")
    end = metrics.milestones_ms.get("end", metrics.milestones_ms.get("last_token"))
    parts = [f"run {index + 1:>3}  ok  {tl.http_version or '?'}"]
    if ttft is not None:
        parts.append(f"TTFT {ttft:.1f} ms")
    output = metrics.milestones_ms.get("first_output")
    if output is not None and metrics.tokens.before_output:
        parts.append(f"first output {output:.1f} ms")
    if end is not None:
        parts.append(f"total {end:.1f} ms")
    if tl.reused_connection:
        parts.append("reused connection")
    return "  ".join(parts)


def render_series(
    console: Console,
    plan: SeriesPlan,
    levels: Sequence[Level],
    *,
    total: SeriesSummary,
    slo: Sequence[SLOResult] | None,
    exit_code: int,
) -> None:
    """The series report; every line redacted and its control characters spelled out."""
    from promptpath.report.redact import Redactor
    from promptpath.report.sanitise import sanitised

    with sanitised(console, Redactor.for_options(levels[0].results[0].options)):
        _render_series(console, plan, levels, total=total, slo=slo, exit_code=exit_code)


def _render_series(
    console: Console,
    plan: SeriesPlan,
    levels: Sequence[Level],
    *,
    total: SeriesSummary,
    slo: Sequence[SLOResult] | None,
    exit_code: int,
) -> None:
    first = levels[0].results[0]
    opts = first.options
    how = "one connection (--reuse)" if plan.reuse else "fresh connections"
    if plan.concurrency:
        how = f"concurrency {','.join(map(str, plan.concurrency))}"
        if plan.connections is not None:
            plural = "s" if plan.connections > 1 else ""
            how += f" over ≤{plan.connections} connection{plural}"
    console.print(
        Text.assemble(
            ("promptpath series ", "bold"),
            f"→ {display_url(opts.target.url)}  ({opts.provider} · {opts.model} ·"
            f" {total.runs} runs · {how})",
        )
    )
    if total.aggregate:
        console.print(summary_table(total))
    note = thin_note(total)
    if note is not None:
        console.print(Text(note, style="dim"))
    results = [r for level in levels for r in level.results]
    codes = [c for level in levels for c in level.codes]
    ttfts = [compute(r.timeline).milestones_ms.get("ttft") for r in results]
    seen = [t for t in ttfts if t is not None]
    if seen:
        # From the fastest run up, so run-to-run spread shows (from 0 it would all be full
        # bars); a run with no TTFT draws as the floor.
        low, high = min(seen), max(seen)
        spark = sparkline([(t or low) - low for t in ttfts], max(10, console.width - 40))
        console.print(f"TTFT by run ({low:.1f} → {high:.1f} ms)  {spark}")
    if len(results) <= PER_RUN_LINES_MAX:
        for index, (result, code) in enumerate(zip(results, codes, strict=True)):
            console.print(Text(_run_line(index, result, code), style="red" if code else ""))
    if len(levels) > 1:
        console.print(sweep_table(levels))
    if total.failures:
        failed = sum(total.failures.values())
        by_stage = ", ".join(f"{stage} {n}" for stage, n in total.failures.items())
        console.print(
            Text(
                f"failures: {failed} of {total.runs} runs ({total.error_rate * 100:.1f}%):"
                f" {by_stage}",
                style="red",
            )
        )
    for verdict in slo or ():
        console.print(Text(verdict.describe(), style="green" if verdict.ok else "red"))
    console.print(Text(series_line(total, slo, exit_code), style="red" if exit_code else "green"))


def sweep_table(levels: Sequence[Level]) -> Table:
    """The curve: TTFT percentiles and the runs' gap p99 against concurrency."""
    table = Table(box=None, pad_edge=False, padding=(0, 1), header_style="bold")
    for column in ("concurrency", "runs", "failed", "TTFT p50", "TTFT p95", "TTFT p99"):
        table.add_column(column, justify="right")
    table.add_column("gap p99 (p95 of runs)", justify="right")
    for level in levels:
        agg = level.summary.aggregate
        ttft, gap = agg.get("ttft"), agg.get("gap_p99")
        table.add_row(
            str(level.concurrency),
            str(level.summary.runs),
            str(sum(level.summary.failures.values())),
            *("—" if ttft is None else f"{ttft.stat(q):.1f} ms" for q in ("p50", "p95", "p99")),
            "—" if gap is None else f"{gap.p95:.1f} ms",
        )
    return table


def series_line(total: SeriesSummary, slo: Sequence[SLOResult] | None, exit_code: int) -> str:
    """The series' verdict line (terminal, ``headline``, the HTML banner): each SLO it
    breached first (``FAILED: ttft_p95 < 800ms breached (912 ms) — …``), then the runs."""
    ttft = total.aggregate.get("ttft")
    figures = "" if ttft is None else f", TTFT p50 {ttft.p50:.0f} ms, p95 {ttft.p95:.0f} ms"
    failed = sum(total.failures.values())
    runs = f"{total.runs - failed} of {total.runs} runs ok{figures}"
    if exit_code == 0:
        return f"OK: {runs}"
    wrong = wrong_first((), "fail", slo or ())
    if wrong is not None and exit_code == ExitCode.SLO:
        return f"{wrong} — {runs} (exit {exit_code})"
    return f"FAILED: {runs} (exit {exit_code})"


__all__ = [
    "SCHEMA_VERSION",
    "Level",
    "render_series",
    "series_json",
    "series_line",
    "summary_table",
]
