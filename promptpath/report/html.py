"""``--html FILE``: one self-contained page a ticket can carry, drawn from the report object.

Pure: the ``--json`` body in (already redacted), markup out. No script runs, nothing is
fetched (no external fonts, images or styles: it opens offline and prints); the body itself
rides along in a ``<script type="application/json">`` data block, so a reader's tool can
take the figures from the page. Every string that came from the network is HTML-escaped
with its control characters made visible.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from promptpath.core.textsafe import visible
from promptpath.core.verdict import tone_of
from promptpath.report import charts, svg
from promptpath.report.labels import STAGE_LABELS, UNVERIFIED
from promptpath.report.pathrows import hop_rows
from promptpath.report.reproduce import reproduction

_CSS = """
body { font: 14px/1.4 'DejaVu Sans', Arial, sans-serif; color: #222; margin: 24px;
 max-width: 1000px; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 24px 0 8px; }
.sub { color: #555; } .verdict { padding: 8px 12px; border-radius: 4px; font-weight: bold; }
.ok { background: #e6f4ea; color: #1e5e2e; } .failed { background: #fde8e8; color: #8a1c1c; }
.warned { background: #fff4d6; color: #6b5200; } .caution { border-left: 4px solid #d4a000;
 padding: 4px 10px; background: #fffaeb; }
table { border-collapse: collapse; margin: 4px 0; } td, th { padding: 2px 10px 2px 0;
 text-align: left; vertical-align: top; } th { color: #555; font-weight: normal; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.pass { color: #1e5e2e; } .warn { color: #8a6d00; } .fail, .error { color: #8a1c1c; }
.skip { color: #777; } pre { background: #f6f6f6; padding: 8px; overflow-x: auto;
 white-space: pre-wrap; word-break: break-all; } code { background: #f6f6f6; }
svg { max-width: 100%; height: auto; }
.evidence-title { color: #555; margin: 8px 0 0; }
pre.evidence { max-height: 16em; overflow: auto; font-size: 12px; white-space: pre-wrap;
 margin-top: 2px; }
@media print { body { margin: 0; } pre.evidence { max-height: none; overflow: visible; } }
"""


def t(value: object) -> str:
    """Untrusted text for the page: control characters visible, markup escaped."""
    return escape(visible("" if value is None else str(value)))


def _ms(value: object) -> str:
    return f"{value:.1f}" if isinstance(value, (int, float)) else "—"


def _cell(value: object) -> str:
    """A fact's value as a person reads it: yes/no, whole numbers whole, ms to 0.1."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1f}"
    return "—" if value is None else str(value)


def _table(rows: Iterable[Sequence[object]], head: Sequence[str] = ()) -> str:
    out = ["<table>"]
    if head:
        out.append("<tr>" + "".join(f"<th>{t(h)}</th>" for h in head) + "</tr>")
    for row in rows:
        cells = []
        for cell in row:
            number = isinstance(cell, (int, float)) and not isinstance(cell, bool)
            cells.append(f"<td{' class=n' if number else ''}>{t(_cell(cell))}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "".join(out)


def _facts(pairs: Iterable[tuple[str, object]]) -> str:
    """Name/value rows, left-aligned; rows whose value is missing are left out."""
    return _table((k, _cell(v)) for k, v in pairs if v not in (None, "", [], {}))


#: The banner's class for each tone of the verdict line.
_BANNER = {"ok": "ok", "warn": "warned", "fail": "failed"}


def _verdict(line: str) -> str:
    return f"<p class='verdict {_BANNER[tone_of(line)]}'>{t(line)}</p>"


def _joined(*parts: object, sep: str = " · ") -> str | None:
    """The parts that are present, joined; None when none is (a row then stays out)."""
    shown = [str(p) for p in parts if p not in (None, "", [], {})]
    return sep.join(shown) or None


def _unverified(tls: Mapping[str, Any] | None) -> bool:
    """A handshake that completed with its certificate not checked (``-k``)."""
    return tls is not None and tls.get("verified") is None and bool(tls.get("version"))


def _stages(body: Mapping[str, Any]) -> str:
    rows = [
        (STAGE_LABELS.get(s["stage"], s["stage"]), s["end"] - s["start"], s["start"], s["end"])
        for s in body.get("spans_ms") or []
    ]
    return _table(rows, ("stage", "ms", "from ms", "to ms"))


def _tls(tls: Mapping[str, Any] | None) -> str:
    if not tls:
        return ""
    cert = tls.get("cert") or {}
    client = tls.get("client_cert") or {}
    offered = ", ".join(tls.get("alpn_offered") or [])
    alpn = tls.get("alpn") or ("none agreed" if tls.get("version") else "no handshake")
    verified: object = tls.get("verified")
    if _unverified(tls):
        verified = "no: certificate not verified (-k)"
    return _facts(
        [
            ("SNI sent", tls.get("sni")),
            ("ALPN", f"{alpn} (offered {offered})" if offered else alpn),
            ("version · cipher", _joined(tls.get("version"), tls.get("cipher"))),
            ("resumed", tls.get("resumed") if tls.get("version") else None),
            ("verified", verified),
            ("verify error", tls.get("verify_error")),
            ("certificate", cert.get("subject")),
            ("issuer", cert.get("issuer")),
            ("names", ", ".join(cert.get("sans") or [])),
            ("valid", _joined(cert.get("not_before"), cert.get("not_after"), sep=" → ")),
            ("days left", cert.get("days_left")),
            ("chain", cert.get("chain")),
            ("client certificate", client.get("subject") if client.get("sent") else None),
            ("intercepted", tls.get("intercepted") or None),
        ]
    )


def _dns(dns: Mapping[str, Any] | None) -> str:
    if not dns:
        return ""
    answers = ", ".join(
        f"{a.get('ip')} ({a.get('family')})" if a.get("family") else str(a.get("ip"))
        for a in dns.get("answers") or []
        if a.get("ip")
    )
    return _facts(
        [
            ("resolver", dns.get("resolver")),
            ("answers", answers),
            ("used", dns.get("used")),
            ("TTL", dns.get("ttl")),
            ("CNAME chain", " → ".join(dns.get("cname_chain") or [])),
            ("error", dns.get("error")),
        ]
    )


def _first_output(body: Mapping[str, Any]) -> str | None:
    """``1500.2 ms from start, 1200.0 ms after the first reasoning`` when the answer's
    first text came after other content; its time alone when it came first."""
    out = body.get("first_output_ms") or {}
    start = out.get("from_start")
    if not isinstance(start, (int, float)):
        return None
    after = out.get("after")
    if not after:
        return f"{_ms(start)} ms from start"
    lead = _ms(out.get("after_ttft"))
    return (
        f"{_ms(start)} ms from start, {lead} ms after the first {str(after).replace('+', ' and ')}"
    )


def _counted(tok: Mapping[str, Any]) -> str | None:
    count, source = tok.get("count"), tok.get("count_source")
    if count is None:
        return None
    return f"{count} (counted by {source})" if source else str(count)


def _tokens(body: Mapping[str, Any]) -> str:
    tok = body.get("tokens") or {}
    gaps = tok.get("gaps_ms") or {}
    gap_line = "  ".join(f"{k} {_ms(gaps.get(k))}" for k in ("p50", "p90", "p95", "p99", "max"))
    return _facts(
        [
            ("TTFT ms (first content of any kind)", (body.get("ttft_ms") or {}).get("from_start")),
            # One round trip off TTFT from the request: the server's side, and the wire's.
            (
                "TTFT at the server side ms (less one round trip)",
                body.get("ttft_network_adjusted_ms"),
            ),
            ("round trip on the wire ms", body.get("rtt_ms")),
            ("first output (answer text)", _first_output(body)),
            ("tokens", _counted(tok)),
            ("content events", tok.get("events")),
            ("tokens/s", tok.get("per_second")),
            ("mean inter-token latency ms", tok.get("mean_itl_ms")),
            ("gaps ms", gap_line if gaps else None),
            ("coalesced by the path", tok.get("coalesced")),
            ("stream end", (body.get("stream") or {}).get("end")),
            ("compressed", (body.get("stream") or {}).get("compressed")),
        ]
    )


def _hops(finding: Mapping[str, Any]) -> str:
    """The path probe's hop table, as the terminal prints it under the finding."""
    if finding.get("probe") != "path":
        return ""
    rows = hop_rows(finding.get("evidence") or {})
    if not rows:
        return ""
    head = ("hop", "address", "loss", "min ms", "median ms", "max ms", "adds ms", "")
    return _table(
        ((r.ttl, r.address, r.loss, r.min_ms, r.median_ms, r.max_ms, r.adds, r.note) for r in rows),
        head,
    )


def _findings(findings: Sequence[Mapping[str, Any]]) -> str:
    if not findings:
        return ""
    out = ["<h2>Findings</h2>"]
    for f in findings:
        verdict = str(f.get("verdict", ""))
        out.append(
            f"<h3 class='{t(verdict)}'>[{t(verdict.upper())}] {t(f.get('probe'))}</h3>"
            f"<p>{t(f.get('summary'))}</p>"
        )
        advice = f.get("advice") or []
        if advice:
            out.append("<ul>" + "".join(f"<li>{t(a)}</li>" for a in advice) + "</ul>")
        out.append(_hops(f))
        out.append(_evidence(f.get("evidence")))
    return "".join(out)


def _evidence(evidence: object) -> str:
    """A finding's evidence as indented JSON in a preformatted block: its layout's line
    breaks kept, each line's control characters spelled out (JSON already escapes those
    inside strings). A scroll box on screen, printed whole."""
    if not evidence:
        return ""
    text = json.dumps(evidence, indent=2, ensure_ascii=False, default=str)
    lines = "\n".join(t(line) for line in text.split("\n"))
    return f"<p class='evidence-title'>evidence</p><pre class='evidence'>{lines}</pre>"


def _run_sections(body: Mapping[str, Any]) -> list[str]:
    runs = svg.runs_of(body)
    axis = svg.Axis(svg.axis_end([run for _title, run in runs]))
    out = [_verdict(str(body.get("headline") or ""))]
    figures, y = [], 4.0
    for title, run in runs:
        markup, height = svg.waterfall(run, axis, y, title)
        figures.append(markup)
        y += height
    out.append("<h2>Waterfall</h2>" + svg.document(figures, y + 4, "waterfall"))
    out.append(_stages(body))
    markup, height = svg.token_timeline(body, axis, 4.0)
    out.append("<h2>Token timeline</h2>" + svg.document([markup], height + 8, "token timeline"))
    out.append(_tokens(body))
    error = body.get("error")
    if error:
        out.append("<h2>Error</h2>")
        out.append(_facts([(k, error.get(k)) for k in ("stage", "kind", "message", "at_ms")]))
    out.append("<h2>Connection</h2>")
    address = body.get("address") or {}
    out.append(
        _facts(
            [
                ("address", f"{address.get('ip')} port {address.get('port')}" if address else None),
                ("HTTP", body.get("http_version")),
                ("status", body.get("status")),
                ("reused connection", body.get("reused_connection")),
                ("proxy note", body.get("proxy_note")),
            ]
        )
    )
    for name, section in (("DNS", _dns(body.get("dns"))), ("TLS", _tls(body.get("tls")))):
        if section:
            out.append(f"<h2>{name}</h2>{section}")
    proxy = body.get("proxy")
    if proxy:
        keys = ("url", "source", "address", "tunnel", "connect_status", "authenticated")
        out.append("<h2>Proxy</h2>" + _facts([(k, proxy.get(k)) for k in keys]))
    server = body.get("server")
    if server:
        rid = server.get("request_id") or {}
        named = server.get("edge_name")
        edge = f"{named['name']} ({named['cdn']}: {named['header']})" if named else "not named"
        out.append(
            "<h2>Server</h2>"
            + _facts(
                [
                    ("request id", f"{rid.get('value')} ({rid.get('header')})" if rid else None),
                    ("edge", edge),
                    ("server's own time ms", (server.get("time") or {}).get("ms")),
                    ("network share of the wait ms", server.get("network_ms")),
                ]
            )
        )
    headers = body.get("response_headers") or {}
    if headers:
        out.append("<h2>Response headers</h2>" + _table(headers.items()))
    out.append(_findings(body.get("findings") or []))
    return out


def _aggregate(aggregate: Mapping[str, Any]) -> str:
    rows = [
        (name, *(agg.get(k) for k in ("n", "min", "p50", "p95", "p99", "max")), agg.get("unit"))
        for name, agg in aggregate.items()
        if isinstance(agg, Mapping)
    ]
    return _table(rows, ("metric", "n", "min", "p50", "p95", "p99", "max", "unit"))


def _slo(verdicts: Sequence[Mapping[str, Any]] | None) -> str:
    if not verdicts:
        return ""
    rows = [
        (
            v.get("expr") or v.get("metric"),
            "" if v.get("concurrency") is None else v.get("concurrency"),
            "met" if v.get("ok") else "BREACHED",
            v.get("value"),
        )
        for v in verdicts
    ]
    return "<h2>SLOs</h2>" + _table(rows, ("SLO", "at concurrency", "verdict", "value"))


def _series_sections(body: Mapping[str, Any]) -> list[str]:
    aggregate = body.get("aggregate") or {}
    ttft = aggregate.get("ttft_ms") or {}
    marks = {k: float(ttft[k]) for k in ("p50", "p95") if isinstance(ttft.get(k), (int, float))}
    runs = body.get("runs") or []
    failed = sum(1 for r in runs if not r.get("ok"))
    # The series' own verdict line; a report from before it carried one is still drawn.
    line = str(body.get("headline") or "") or (
        f"{'FAILED' if not body.get('ok') else 'OK'}: {len(runs)} runs, {failed} failed;"
        f" TTFT p50 {_ms(ttft.get('p50'))} ms, p95 {_ms(ttft.get('p95'))} ms"
    )
    out = [_verdict(line), "<h2>TTFT distribution</h2>"]
    out.append(charts.histogram(charts.ttfts(body), marks))
    out.append("<h2>Aggregate</h2>" + _aggregate(aggregate))
    sweep = body.get("sweep")
    if sweep:
        out.append("<h2>Concurrency curve</h2>" + charts.concurrency_curve(sweep))
    out.append(_slo(body.get("slo")))
    rows = [
        (
            i + 1,
            r.get("exit_code"),
            r.get("status"),
            (r.get("ttft_ms") or {}).get("from_start"),
            (r.get("first_output_ms") or {}).get("from_start"),
            (r.get("milestones_ms") or {}).get("end"),
            (r.get("error") or {}).get("message") or "",
        )
        for i, r in enumerate(runs)
    ]
    head = ("run", "exit", "status", "TTFT ms", "first output ms", "end ms", "error")
    out.append("<h2>Runs</h2>" + _table(rows, head))
    for title, run in svg.runs_of(body):
        out.append(f"<h2>Waterfall of the {t(title)}</h2>")
        markup, height = svg.waterfall(run, svg.Axis(svg.axis_end([run])), 4.0)
        out.append(svg.document([markup], height + 8, "waterfall"))
    return out


def _compare_sections(body: Mapping[str, Any]) -> list[str]:
    out = [_verdict("; ".join(body.get("summary") or []) or "compare")]
    runs = svg.runs_of(body)
    axis = svg.Axis(svg.axis_end([run for _title, run in runs]))
    figures, y = [], 4.0
    for title, run in runs:
        markup, height = svg.waterfall(run, axis, y, title)
        figures.append(markup)
        y += height
    out.append("<h2>Waterfalls on one axis</h2>" + svg.document(figures, y + 4, "compare"))
    rows = [
        (d.get("label", key), d.get("http2"), d.get("http3"), d.get("delta"), d.get("better"))
        for key, d in (body.get("differences") or {}).items()
        if isinstance(d, Mapping)
    ]
    head = ("metric", "HTTP/2", "HTTP/3", "Δ", "verdict")
    out.append("<h2>Differences</h2>" + _table(rows, head))
    return out


def _run_bodies(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every run object the report holds: a series' runs, a compare's results, or itself."""
    schema = str(body.get("schema", ""))
    if schema.startswith("promptpath.series"):
        return list(body.get("runs") or [])
    if schema.startswith("promptpath.compare"):
        return list(body.get("results") or [])
    return [body]


def _context(runs: Sequence[Mapping[str, Any]], schema: str) -> str:
    """Under the title: the dialect, the model, the HTTP version(s) and when the runs
    happened (the first's start, and the last's when a series spans time)."""
    first = runs[0] if runs else {}
    target = first.get("target") or {}
    versions = " and ".join(
        dict.fromkeys(str(r["http_version"]) for r in runs if r.get("http_version"))
    )
    starts = [str(r["started_at"]) for r in runs if r.get("started_at")]
    when = None
    if starts:
        when = starts[0] if starts[0] == starts[-1] else f"{starts[0]} to {starts[-1]}"
    shown = (target.get("provider"), target.get("model"), versions, when, f"schema {schema}")
    return " · ".join(str(v) for v in shown if v)


def _reproduce(command: Sequence[str]) -> str:
    """The command that reproduces the run, without the credential it carried
    (report/reproduce.py), and what the reader must put back."""
    shown = reproduction(command)
    note = "".join(f"<p class='caution'>{t(n)}</p>" for n in shown.notes)
    return f"<h2>Reproduce</h2><pre>{t(shown.line)}</pre>{note}"


def render_html(body: Mapping[str, Any], *, command: Sequence[str] = ()) -> str:
    """The whole page for a run, series or compare report object; ``command`` (already
    redacted) is shown as the way to reproduce it."""
    schema = str(body.get("schema", ""))
    target = svg.target_of(body)
    if schema.startswith("promptpath.series"):
        sections = _series_sections(body)
    elif schema.startswith("promptpath.compare"):
        sections = _compare_sections(body)
    else:
        sections = _run_sections(body)
    runs = _run_bodies(body)
    if any(_unverified(run.get("tls")) for run in runs):
        sections.insert(1, f"<p class='caution'>{t(UNVERIFIED)}</p>")
    sub = _context(runs, schema)
    if command:
        sections.append(_reproduce(command))
    # No "<" at all inside the data block: "</script>" or "<!--" in a string cannot end it.
    data = json.dumps(body, ensure_ascii=True).replace("<", "\\u003c").replace(">", "\\u003e")
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        # No request may leave the page, whatever a hostile string tries.
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none';"
        " style-src 'unsafe-inline'; img-src data:\">"
        f"<title>promptpath: {t(target.get('url'))}</title><style>{_CSS}</style></head><body>"
        f"<h1>promptpath → {t(target.get('url'))}</h1><p class='sub'>{t(sub)}</p>"
        + "\n".join(sections)
        + f"<script type='application/json' id='promptpath-report'>{data}</script>"
        + "</body></html>\n"
    )
