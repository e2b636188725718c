"""``--markdown FILE``: a run, series or compare as a short Markdown summary for a ticket.

Pure: the ``--json`` body in (already redacted), text out. The verdict line first (the
report's ``headline``, worst finding first), then the target, model, HTTP version and
when; the stages; TTFT and the gaps; each finding with its advice; the command that
reproduces the run (report/reproduce.py, as the HTML page shows it). A kind of report
not summarised in detail still gets its verdict line and a pointer to ``--json``.

Every string from the report is untrusted (a model name, an error message, a header
value came from the network): its control characters are spelled out
(core/textsafe.py, so a newline cannot end a table row or start a block), every
character Markdown or GFM makes active is backslash-escaped (no link, image, HTML tag,
emphasis, code span or table cell can be opened by it), and it is cut to a bound, as
are the lists of rows: the summary stays small whatever the report holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from promptpath.core.textsafe import visible
from promptpath.report.labels import STAGE_LABELS
from promptpath.report.reproduce import reproduction

#: A value's bound (a model, a header, a stage), and a sentence's (a finding, an error).
VALUE_CHARS: Final = 200
PROSE_CHARS: Final = 1000
#: Rows of a list or table before the rest are counted instead of shown.
MAX_ROWS: Final = 40
MAX_ADVICE: Final = 8

#: The ASCII characters CommonMark or GFM give a meaning inline: backslash, code spans,
#: emphasis and strikethrough, links and images, raw HTML and autolinks, entities,
#: table cells, headings and block quotes, GitHub's math, mentions and references.
#: CommonMark lets any ASCII punctuation be backslash-escaped and shows it as itself.
_ACTIVE: Final = re.compile(r"([\\`*_\[\]<>!|~&#$@])")


def text(value: object, limit: int = VALUE_CHARS) -> str:
    """Untrusted text inert in Markdown, on one line, at most ``limit`` characters (before
    escaping; a cut is marked with …)."""
    shown = visible("" if value is None else str(value))
    if len(shown) > limit:
        shown = shown[: limit - 1] + "…"
    return _ACTIVE.sub(r"\\\1", shown)


def _ms(value: object) -> str:
    """A figure in ms to 0.1, or — when there is none (never a string from the report)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—"
    return f"{value:.1f}"


def _cell(value: object) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1f}"
    if isinstance(value, int):
        return str(value)
    return "—" if value in (None, "") else text(value)


def _table(head: Sequence[str], rows: Iterable[Sequence[object]], numeric: int = 1) -> list[str]:
    """A GFM table; the columns from ``numeric`` on are right-aligned. Rows past MAX_ROWS
    are counted under it."""
    rows = list(rows)
    align = ["---" if i < numeric else "--:" for i in range(len(head))]
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows[:MAX_ROWS]]
    if len(rows) > MAX_ROWS:
        out += ["", f"… and {len(rows) - MAX_ROWS} more rows (the --json report has them all)."]
    return out


def _runs_of(body: Mapping[str, Any], schema: str) -> list[Mapping[str, Any]]:
    if schema.startswith("promptpath.series"):
        return [r for r in body.get("runs") or [] if isinstance(r, Mapping)]
    if schema.startswith("promptpath.compare"):
        return [r for r in body.get("results") or [] if isinstance(r, Mapping)]
    return [body]


def _target(body: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    target = body.get("target")
    if isinstance(target, str):  # a series names its target by URL alone
        first = runs[0].get("target") if runs else None
        return {**(first if isinstance(first, Mapping) else {}), "url": target}
    if not isinstance(target, Mapping) and runs and runs[0] is not body:
        target = runs[0].get("target")
    return target if isinstance(target, Mapping) else {}


def _context(body: Mapping[str, Any], runs: Sequence[Mapping[str, Any]], schema: str) -> str:
    """Target, dialect, model, HTTP version(s), when (the first start, and the last's
    when the runs span time), the schema."""
    target = _target(body, runs)
    versions = " and ".join(
        dict.fromkeys(str(r["http_version"]) for r in runs if r.get("http_version"))
    )
    starts = [str(r["started_at"]) for r in runs if r.get("started_at")]
    when = None
    if starts:
        when = starts[0] if starts[0] == starts[-1] else f"{starts[0]} to {starts[-1]}"
    parts = [
        ("target", target.get("url")),
        ("dialect", target.get("provider")),
        ("model", target.get("model")),
        ("", versions),
        ("when", when),
    ]
    shown = [f"{name} {text(value)}".lstrip() for name, value in parts if value]
    return " · ".join([*shown, f"schema {text(schema or 'unknown')}"])


def _verdict(line: object) -> list[str]:
    return [f"**{text(line, PROSE_CHARS)}**" if line else "**(no verdict line)**", ""]


def _unverified(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    from promptpath.report.labels import UNVERIFIED

    for run in runs:
        tls = run.get("tls")
        if isinstance(tls, Mapping) and tls.get("verified") is None and tls.get("version"):
            return [f"> **Caution:** {text(UNVERIFIED, PROSE_CHARS)}", ""]
    return []


def _stages(body: Mapping[str, Any]) -> list[str]:
    spans = [s for s in body.get("spans_ms") or [] if isinstance(s, Mapping)]
    if not spans:
        return []
    rows = []
    for span in spans:
        start, end = span.get("start"), span.get("end")
        took = (
            end - start
            if isinstance(start, (int, float)) and isinstance(end, (int, float))
            else None
        )
        stage = span.get("stage")
        rows.append((STAGE_LABELS.get(str(stage), stage), _ms(took), _ms(start)))
    return ["### Stages", "", *_table(("stage", "ms", "from t0 ms"), rows), ""]


def _tokens(body: Mapping[str, Any]) -> list[str]:
    ttft = body.get("ttft_ms") or {}
    tokens = body.get("tokens") or {}
    gaps = tokens.get("gaps_ms") or {}
    lines = []
    if ttft.get("from_start") is not None:
        lines.append(
            f"- TTFT: {_ms(ttft.get('from_start'))} ms from t0"
            f" ({_ms(ttft.get('from_request'))} ms from the request sent)"
        )
    adjusted, rtt = body.get("ttft_network_adjusted_ms"), body.get("rtt_ms")
    if adjusted is not None and rtt is not None:
        lines.append(
            f"- ≈ {_ms(adjusted)} ms at the server side, {_ms(rtt)} ms on the wire (one round trip)"
        )
    if gaps:
        lines.append(
            f"- gaps between tokens: p50 {_ms(gaps.get('p50'))} ms,"
            f" p95 {_ms(gaps.get('p95'))} ms, max {_ms(gaps.get('max'))} ms"
        )
    count = tokens.get("count")
    if isinstance(count, int):
        source = tokens.get("count_source")
        counted = f" (counted by {text(source)})" if source else ""
        rate = tokens.get("per_second")
        per_s = f", {_ms(rate)} tokens/s" if isinstance(rate, (int, float)) else ""
        lines.append(f"- tokens: {count}{counted}{per_s}")
    if tokens.get("mostly_coalesced"):
        lines.append("- most tokens arrived coalesced in one read: true per-token gaps are hidden")
    end = (body.get("stream") or {}).get("end")
    if end:
        lines.append(f"- stream end: {text(end)}")
    return ["### Tokens", "", *lines, ""] if lines else []


def _error(body: Mapping[str, Any]) -> list[str]:
    error = body.get("error")
    if not isinstance(error, Mapping):
        return []
    where = [
        f"{name} {text(error.get(key))}"
        for name, key in (("stage", "stage"), ("kind", "kind"))
        if error.get(key)
    ]
    if isinstance(error.get("at_ms"), (int, float)):
        where.append(f"at {_ms(error.get('at_ms'))} ms")
    if body.get("status") is not None:
        where.append(f"HTTP status {_cell(body.get('status'))}")
    return [
        "### Error",
        "",
        f"- {' · '.join(where) or 'unknown stage'}",
        f"- {text(error.get('message') or 'no message', PROSE_CHARS)}",
        "",
    ]


def _findings(findings: Sequence[object]) -> list[str]:
    shown = [f for f in findings if isinstance(f, Mapping)]
    if not shown:
        return []
    out = ["### Findings", ""]
    for f in shown[:MAX_ROWS]:
        verdict = text(str(f.get("verdict") or "?").upper(), 16)
        out.append(f"- **{verdict}** {text(f.get('probe'))}: {text(f.get('summary'), PROSE_CHARS)}")
        advice = [a for a in f.get("advice") or [] if a]
        out += [f"  - {text(a, PROSE_CHARS)}" for a in advice[:MAX_ADVICE]]
        if len(advice) > MAX_ADVICE:
            out.append(f"  - … and {len(advice) - MAX_ADVICE} more")
    if len(shown) > MAX_ROWS:
        out.append(f"- … and {len(shown) - MAX_ROWS} more findings (the --json report has them)")
    return [*out, ""]


def _run(body: Mapping[str, Any]) -> list[str]:
    return [*_stages(body), *_tokens(body), *_error(body), *_findings(body.get("findings") or [])]


def _stat(aggregate: Mapping[str, Any], metric: str, key: str) -> str:
    figures = aggregate.get(metric)
    return _ms(figures.get(key)) if isinstance(figures, Mapping) else "—"


def _series(body: Mapping[str, Any]) -> list[str]:
    aggregate = body.get("aggregate") or {}
    rows = [
        (name, *(agg.get(k) for k in ("n", "p50", "p95", "max")), agg.get("unit"))
        for name, agg in aggregate.items()
        if isinstance(agg, Mapping)
    ]
    out = ["### Aggregate", "", *_table(("metric", "n", "p50", "p95", "max", "unit"), rows), ""]
    sweep = [level for level in body.get("sweep") or [] if isinstance(level, Mapping)]
    if sweep:
        levels = [
            (
                level.get("concurrency"),
                level.get("runs"),
                level.get("error_rate"),
                _stat(level.get("aggregate") or {}, "ttft_ms", "p50"),
                _stat(level.get("aggregate") or {}, "ttft_ms", "p95"),
            )
            for level in sweep
        ]
        head = ("concurrency", "runs", "error rate", "TTFT p50 ms", "TTFT p95 ms")
        out += ["### Concurrency", "", *_table(head, levels), ""]
    slo = [v for v in body.get("slo") or [] if isinstance(v, Mapping)]
    if slo:
        verdicts = [
            (
                v.get("expr") or v.get("metric"),
                v.get("concurrency"),
                "met" if v.get("ok") else "BREACHED",
                v.get("value"),
            )
            for v in slo
        ]
        out += [
            "### SLOs",
            "",
            *_table(("SLO", "at concurrency", "verdict", "value"), verdicts, 3),
            "",
        ]
    runs = [r for r in body.get("runs") or [] if isinstance(r, Mapping)]
    rows = [
        (
            i + 1,
            r.get("exit_code"),
            r.get("status"),
            _ms((r.get("ttft_ms") or {}).get("from_start")),
            _ms((r.get("milestones_ms") or {}).get("end")),
            (r.get("error") or {}).get("message") or "",
        )
        for i, r in enumerate(runs)
    ]
    runs_head = ("run", "exit", "status", "TTFT ms", "end ms", "error")
    return [*out, "### Runs", "", *_table(runs_head, rows), ""]


def _compare(body: Mapping[str, Any]) -> list[str]:
    rows = [
        (d.get("label", key), d.get("http2"), d.get("http3"), d.get("delta"), d.get("better"))
        for key, d in (body.get("differences") or {}).items()
        if isinstance(d, Mapping)
    ]
    return ["### Differences", "", *_table(("metric", "HTTP/2", "HTTP/3", "Δ", "better"), rows), ""]


def _reproduce(command: Sequence[str]) -> list[str]:
    shown = reproduction(command)
    # The user's own command (redacted), in a fenced block: its control characters
    # spelled out, it is one line, and shlex quotes a backtick, so no line of it can
    # close the fence.
    line = visible(shown.line)
    notes = [f"> {text(note, PROSE_CHARS)}" for note in shown.notes]
    return ["### Reproduce", "", "```sh", line, "```", *notes, ""]


def render_markdown(body: Mapping[str, Any], *, command: Sequence[str] = ()) -> str:
    """The Markdown summary of a run, series or compare report object; ``command``
    (already redacted) is shown as the way to reproduce it."""
    schema = str(body.get("schema") or "")
    runs = _runs_of(body, schema)
    if schema.startswith("promptpath.compare"):
        line: object = "; ".join(str(s) for s in body.get("summary") or []) or body.get("headline")
    else:
        line = body.get("headline")
    out = _verdict(line)
    out += [_context(body, runs, schema), ""]
    out += _unverified(runs)
    if schema.startswith("promptpath.series"):
        out += _series(body)
    elif schema.startswith("promptpath.compare"):
        out += _compare(body)
    elif schema.startswith("promptpath.run") or not schema:
        out += _run(body)
    else:
        out += [f"This kind of report ({text(schema)}) is not summarised here: attach --json.", ""]
    if command:
        out += _reproduce(command)
    return "\n".join(out).rstrip("\n") + "\n"


__all__ = ["MAX_ROWS", "PROSE_CHARS", "VALUE_CHARS", "render_markdown", "text"]
