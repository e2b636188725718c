"""The terminal report: a waterfall on one time axis, the TLS line, a token timeline, a verdict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from promptpath.core.analysis import (
    Metrics,
    compute,
    open_stage_at_error,
    output_note,
)
from promptpath.core.analysis import stage_spans as core_stage_spans
from promptpath.core.cleartext import cleartext_note
from promptpath.core.edgename import edge_words
from promptpath.core.findings import Verdict
from promptpath.core.h3 import describe_h3
from promptpath.core.headers import redact_headers
from promptpath.core.rtt import wire_words
from promptpath.core.servertime import server_account, split_words, stream_time, stream_words
from promptpath.core.stats import sparkline
from promptpath.core.stopped import said
from promptpath.core.timeline import Interception, Timeline, TLSInfo
from promptpath.core.verdict import Tone, run_line, tone_of
from promptpath.core.wsclose import close_words
from promptpath.options import display_url
from promptpath.report.edgestable import edges_table
from promptpath.report.labels import STAGE_LABELS
from promptpath.report.pathtable import path_table
from promptpath.result import TraceResult

if TYPE_CHECKING:
    from promptpath.core.slo import SLOResult  # a plain run never loads the SLO grammar

STAGE_STYLE = {
    "proxy_dns": "cyan",
    "proxy_connect": "blue",
    "proxy_tls": "magenta",
    "tunnel": "bright_blue",
    "dns": "cyan",
    "connect": "blue",
    "tls": "magenta",
    "quic_handshake": "magenta",
    "request": "white",
    "wait": "yellow",
    "first_token": "red",
    "streaming": "green",
}

#: Below this width the cold and warm waterfalls are stacked instead of side by side.
SIDE_BY_SIDE_MIN_WIDTH = 120

#: The verdict line's colour, by its tone.
TONE_STYLE: dict[Tone, str] = {"ok": "green", "warn": "yellow", "fail": "red"}

_VERDICT_STYLE = {
    Verdict.PASS: "green",
    Verdict.WARN: "yellow",
    Verdict.FAIL: "red",
    Verdict.SKIP: "dim",
    Verdict.ERROR: "red",
}


def stage_spans(timeline: Timeline) -> list[tuple[str, str, float, float]]:
    """(label, key, start_ms, end_ms) for each stage that happened, on the t0 axis."""
    return [(STAGE_LABELS[key], key, start, end) for key, start, end in core_stage_spans(timeline)]


def bar(start: float, end: float, total: float, width: int) -> Text:
    # A stage shown as 0.0 ms draws nothing: even one block would claim time not spent.
    if total <= 0 or end - start < 0.05:
        return Text("")
    a = int(start / total * width)
    b = max(a + 1, round(end / total * width))
    return Text(" " * a + "█" * min(b - a, width - a))


def axis_ms(timeline: Timeline, metrics: Metrics) -> float:
    """Where a waterfall's time axis ends: the last stage or the close, at least 1 ms."""
    ends = [end for *_x, end in stage_spans(timeline)] + [metrics.closed_ms or 0.0, 1.0]
    err = timeline.error
    if err is not None and err.t_ns is not None:
        ends.append((err.t_ns - timeline.t0_ns) / 1e6)  # a timeout's axis reaches the deadline
    return max(ends)


def waterfall(
    timeline: Timeline, metrics: Metrics, width: int, title: str = "", total: float | None = None
) -> Table:
    spans = stage_spans(timeline)
    total = total or axis_ms(timeline, metrics)
    bar_width = max(10, width - 34)
    table = Table(
        title=title or None, show_edge=False, box=None, pad_edge=False, title_justify="left"
    )
    table.add_column("stage", no_wrap=True)
    table.add_column("ms", justify="right", no_wrap=True)
    table.add_column(f"0 … {total:.0f} ms", no_wrap=True)
    err = timeline.error
    cut = open_stage_at_error(timeline) if err is not None and err.kind == "timeout" else None
    for label, key, start, end in spans:
        cells = bar(start, end, total, bar_width)
        cells.stylize(STAGE_STYLE.get(key, "white"))
        table.add_row(f"{label} (timed out)" if key == cut else label, f"{end - start:.1f}", cells)
    return table


class Trimmed:
    """``renderable``'s lines without their trailing spaces: rich pads every table cell to
    its column's width, so table lines end in spaces that a pipe, a CI log or a diff keeps.
    Printed through ``console.print``, so the console's sanitiser cleans ``renderable``
    first (report/sanitise.py)."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in console.render_lines(self.renderable, options, pad=False):
            while line and not line[-1].control and not line[-1].text.strip():
                line.pop()
            if line and not line[-1].control:
                last = line[-1]
                line[-1] = Segment(last.text.rstrip(), last.style)
            yield from line
            yield Segment.line()


def print_trimmed(console: Console, renderable: RenderableType) -> None:
    """Print ``renderable`` without the trailing spaces of its lines (``Trimmed``)."""
    console.print(Trimmed(renderable))


def proxy_line(timeline: Timeline) -> str | None:
    """Which proxy carried the run, named by what, and what it said to CONNECT."""
    proxy = timeline.proxy
    if proxy is None:
        return None
    parts = [f"{proxy.url} ({proxy.source})"]
    if proxy.address is not None:
        ip, port = proxy.address
        parts[0] += f" at {f'[{ip}]' if ':' in ip else ip}:{port}"
    if proxy.tunnel and proxy.status is not None:
        parts.append(f"CONNECT → {proxy.status} {proxy.reason or ''}".rstrip())
    elif not proxy.tunnel and proxy.address is not None:
        parts.append("absolute-form requests (http:// target, no tunnel)")
    if proxy.authenticated:
        parts.append("Proxy-Authorization sent")
    parts.extend(f"{name}: {value}" for name, value in proxy.headers)
    return " · ".join(parts)


def websocket_line(timeline: Timeline) -> str | None:
    """A WebSocket run: what the upgrade negotiated, the messages, the close, the pings
    beside the TCP handshake's round trip."""
    ws = timeline.websocket
    if ws is None:
        return None
    parts = []
    if ws.upgraded_ns is not None:
        parts.append(f"subprotocol {ws.subprotocol}" if ws.subprotocol else "no subprotocol")
        parts.append(" ".join(ws.extensions) if ws.extensions else "no extension negotiated")
    frag = f" ({ws.fragmented} fragmented)" if ws.fragmented else ""
    parts.append(f"{ws.messages_sent} message(s) sent, {ws.messages} received{frag}")
    if ws.close_by is not None:
        reason = f" {ws.close_reason!r}" if ws.close_reason else ""
        parts.append(f"closed by {ws.close_by}: {close_words(ws.close_code)}{reason}")
    rtts = sorted(p.rtt_ns / 1e6 for p in ws.pings if p.rtt_ns is not None)
    if ws.pings:
        ping = f"pings {len(rtts)}/{len(ws.pings)} answered"
        if rtts:
            ping += f", RTT p50 {rtts[len(rtts) // 2]:.2f} ms max {rtts[-1]:.2f} ms"
        connect = timeline.stage("connect") or timeline.stage("proxy_connect")
        if connect is not None and connect.duration_ns is not None:
            ping += f" (TCP handshake {connect.duration_ns / 1e6:.2f} ms)"
        parts.append(ping)
    return " · ".join(parts)


def dns_line(timeline: Timeline) -> str | None:
    """Which resolver answered what, and which address the connection used."""
    answer = timeline.dns
    if answer is None or answer.resolver == "literal":
        return None
    used = timeline.address[0] if timeline.address else None
    addrs = [f"{ip}{' (used)' if ip == used else ''}" for ip, _fam in answer.addresses]
    parts = [f"{answer.resolver} → {', '.join(addrs) or 'no address'}"]
    if answer.cname_chain:
        parts.append("via " + " → ".join(answer.cname_chain))
    if answer.ttl is not None:
        parts.append(f"TTL {answer.ttl} s")
    failed = [a for a in timeline.attempts if a.error]
    if failed:
        parts.append(f"{len(failed)} failed connect attempt(s)")
    return " · ".join(parts)


def tls_line(timeline: Timeline) -> str | None:
    tls = timeline.tls
    if tls is None:
        return None
    offered = ", ".join(tls.alpn_offered) or "none"
    parts = [
        f"SNI {tls.sni or '(none: IP literal)'} → ALPN {tls.alpn or 'none'} (offered {offered})",
    ]
    if tls.version is not None:  # a refused handshake negotiated nothing
        parts.append(f"{tls.version} {tls.cipher}")
    if tls.resumed:
        parts.append("resumed")
    if tls.cert is not None:
        c = tls.cert
        when = (
            f"expires {c.not_after[:10]} ({c.days_left} days)"
            if not c.expired
            else f"EXPIRED {c.not_after[:10]}"
        )
        parts.append(f"cert {c.subject} {when}")
    parts.append(
        "verified"
        if tls.verified
        else "NOT verified (-k)"
        if tls.verified is None
        else f"failed: {tls.verify_error or 'verification'}"
    )
    client = client_cert_words(tls)
    if client:
        parts.append(client)
    if isinstance(tls.intercepted, Interception):
        parts.append(f"INTERCEPTED by {tls.intercepted.by or 'an inspecting hop'}")
    return " · ".join(parts)


def client_cert_words(tls: TLSInfo) -> str | None:
    """mTLS in a few words: what the server asked for and what we answered (None: it did
    not ask, or the handshake did not show it)."""
    if not tls.client_cert_requested:
        return None
    sent = tls.client_cert
    if not tls.client_cert_sent:
        return "client cert asked for, none sent"
    if sent is None:
        return "client cert asked for, sent"
    return f"client cert asked for, sent {sent.subject} (expires {sent.not_after[:10]})"


def interception_lines(timeline: Timeline) -> list[str]:
    """Why the TLS line says INTERCEPTED, and what that usually means for a stream."""
    tls = timeline.tls
    if tls is None or not isinstance(tls.intercepted, Interception):
        return []
    lines = []
    for e in tls.intercepted.evidence:
        if e.kind == "issuer_names_product":
            lines.append(f"issuer {e.issuer} ({e.compared_with})")
        else:
            lines.append(f"issuer {e.issuer}, a direct handshake was shown {e.compared_with}")
    lines.append(
        "a TLS-inspecting proxy re-signs this connection: such proxies are the usual cause of"
        " both buffering (the whole answer held back) and certificate failures"
    )
    return lines


def server_lines(timeline: Timeline, metrics: Metrics) -> list[str]:
    """The server's own account: the wait split by the time it says it spent, then the
    request id and the edge that answered (named, or "edge not named": never a guess)."""
    headers = timeline.response_headers
    acc = server_account(headers, metrics.stages_ms.get("wait"), stream_time(timeline))
    if acc is None:
        return [edge_words(headers)] if headers else []
    lines = [w for w in (split_words(acc), stream_words(acc)) if w]
    ids = []
    if acc.request_id is not None:
        ids.append(f"request id {acc.request_id[1]} ({acc.request_id[0]})")
    named = acc.edge_name
    if named is not None:
        ids.append(f"edge {named.name} ({named.cdn}: {named.header} {named.value})")
    else:
        ids.append(edge_words(headers))
    ids.extend(
        f"edge {e.location} ({e.header} {e.value})" if e.location else f"{e.header} {e.value}"
        for e in acc.edge
        if named is None or e.header != named.header
    )
    lines.append(" · ".join(ids))
    return lines


def token_lines(metrics: Metrics, width: int) -> list[str]:
    tok = metrics.tokens
    lines = [
        f"{tok.count} (counted by {tok.count_source}) in {tok.events} content events"
        + (f", {tok.per_second:.1f} tok/s" if tok.per_second else "")
        + (f", mean ITL {tok.mean_itl_ms:.1f} ms" if tok.mean_itl_ms else "")
        + f", {tok.coalesced} coalesced"
        + (
            f" ({tok.coalesced_unjudged} more shared a read past the reads kept: not judged)"
            if tok.coalesced_unjudged
            else ""
        )
        + (f", {tok.filter_events} content-filter events" if tok.filter_events else "")
    ]
    if tok.usage_untrusted:
        lines.append(
            f"the server's usage sent impossible counts ({', '.join(tok.usage_untrusted)}):"
            " untrusted, ignored"
        )
    g = tok.gap_summary
    if g is not None:
        lines.append(
            f"gaps ms: p50 {g.p50:.1f}  p90 {g.p90:.1f}  p95 {g.p95:.1f}  p99 {g.p99:.1f}"
            f"  max {g.max:.1f}"
        )
        lines.append("gap timeline " + sparkline(tok.gaps, max(10, min(width - 14, 80))))
    if tok.stall_ms is not None:
        # The open gap is the one that mattered; the figures above stop before it.
        lines.append(
            f"unfinished: no token for {tok.stall_ms:.1f} ms after the last one, then the"
            " error (figures above: what arrived)"
        )
    if metrics.mostly_coalesced:
        lines.append("most tokens arrived several per socket read: true per-token gaps are hidden")
    return lines


#: Below this, a client's wait for a CPU between reads is not worth a line (a quiet
#: machine's run-queue time over a whole stream is well under a millisecond).
CPU_WAIT_NOTE_MS = 10.0


def cpu_wait_note(timeline: Timeline) -> str | None:
    """A line when promptpath itself waited long for a CPU while reading: a busy client
    machine (net/schedwait.py), whose merged reads were not blamed on the path."""
    if timeline.cpu_wait_ns is None or timeline.cpu_wait_ns < CPU_WAIT_NOTE_MS * 1e6:
        return None
    return (
        f"promptpath waited {timeline.cpu_wait_ns / 1e6:.1f} ms for a CPU between its reads"
        " (this machine is busy): tokens that merged meanwhile are not counted as coalesced"
        " by the path"
    )


def render_timeline(
    console: Console,
    timeline: Timeline,
    title: str,
    total: float | None = None,
    *,
    with_waterfall: bool = True,
) -> Metrics:
    metrics = compute(timeline)
    width = console.width
    if with_waterfall:
        print_trimmed(console, waterfall(timeline, metrics, width, title, total))
    elif title:
        console.print(Text(title, style="bold"))
    if timeline.reused_connection:
        setup = (
            "QUIC handshake"
            if timeline.quic is not None or timeline.http_version == "HTTP/3"
            else "TCP or TLS"
        )
        console.print(f"[dim]connection reused: no DNS, {setup} on this request[/dim]")
    line = proxy_line(timeline)
    if line and not timeline.reused_connection:
        console.print(Text("PROXY  ") + Text(line))
    line = dns_line(timeline)
    if line and not timeline.reused_connection:
        console.print(Text("DNS    ") + Text(line))
    line = tls_line(timeline)
    if line and not timeline.reused_connection:
        console.print(Text("TLS    ") + Text(line))
        for text in interception_lines(timeline):
            console.print(Text("       ") + Text(text))
    line = websocket_line(timeline)
    if line:
        console.print(Text("WS     ") + Text(line))
    quic = timeline.quic
    if quic is not None and not timeline.reused_connection:
        console.print(
            Text(
                f"QUIC   {quic.version or '?'} · {quic.datagrams_out} datagrams"
                f" out / {quic.datagrams_in} in · {quic.bytes_out} B out"
                f" / {quic.bytes_in} B in"
            )
        )
    for i, text in enumerate(server_lines(timeline, metrics)):
        console.print(Text(("SERVER " if i == 0 else "       ") + text))
    m = metrics.milestones_ms
    if "ttft" in m:
        console.print(
            f"TTFT   {m['ttft']:.1f} ms from start · "
            f"{metrics.ttft_from_request_ms or 0:.1f} ms after the request was sent"
        )
        wire = wire_words(timeline.rtt, metrics.ttft_network_adjusted_ms)
        if wire is not None:
            console.print(Text("       " + wire), highlight=False)
    note = output_note(metrics)
    if note is not None:
        console.print(Text("OUTPUT ") + Text(note), highlight=False)
    if metrics.tokens.events:
        for i, text in enumerate(token_lines(metrics, width)):
            console.print(("tokens " if i == 0 else "       ") + text, highlight=False)
    waited = cpu_wait_note(timeline)
    if waited is not None:
        console.print(Text("CLIENT ") + Text(waited), highlight=False)
    if metrics.stopped is not None:
        console.print(
            Text("STOPPED ")
            + Text(f"{said(metrics.stopped)}: the SDK raises nothing, the answer is cut short"),
            highlight=False,
        )
    return metrics


def render_headers(console: Console, result: TraceResult) -> None:
    """--verbose: what we sent and what came back; credentials always redacted."""
    sent = result.timeline.request  # recorded by the tracer, credentials already redacted
    for name, value in () if sent is None else sent.headers:
        console.print(Text(f"> {name}: {value}", style="dim"))
    for name, value in redact_headers(result.timeline.response_headers):
        console.print(Text(f"< {name}: {value}", style="dim"))


def protocol_name(result: TraceResult) -> str:
    """The HTTP version negotiated; for a run that failed before that, HTTP/3 when it
    was asked for (QUIC has nothing to fall back to), else "?"."""
    if result.timeline.http_version is not None:
        return result.timeline.http_version
    return "HTTP/3" if result.options.http == "3" else "?"


def client_hello_line(timeline: Timeline) -> str | None:
    """-v: the client's own CPU before its first handshake packet, which no stage holds."""
    if timeline.client_hello_ns is None:
        return None
    ms = timeline.client_hello_ns / 1e6
    if timeline.stage("quic_handshake") is not None:
        return (
            f"client CPU: {ms:.2f} ms building the connection and its ClientHello before the"
            " first Initial left (not in the QUIC handshake stage)"
        )
    return f"client CPU: {ms:.2f} ms building the ClientHello before it was sent (not in TLS)"


def render(
    console: Console,
    result: TraceResult,
    *,
    fail_on: str = "fail",
    slos: Sequence[SLOResult] = (),
) -> None:
    """The report of one run; every line redacted and shown with its control characters
    spelled out (report/sanitise.py): much of it is text the server or a hop chose. The
    SLO verdicts come before the verdict line, which stays last (a CI log's last line)."""
    from promptpath.report.redact import Redactor
    from promptpath.report.sanitise import sanitised

    with sanitised(console, Redactor.for_options(result.options)):
        metrics = _render(console, result)
        for slo in slos:
            console.print(Text(slo.describe(), style="green" if slo.ok else "red"))
        line = run_line(
            result.timeline,
            metrics,
            findings=result.findings,
            fail_on=fail_on,
            slos=slos,
        )
        console.print(Text(line, style=TONE_STYLE[tone_of(line)]))


def _render(console: Console, result: TraceResult) -> Metrics:
    """Everything above the SLO lines and the verdict; the cold request's metrics."""
    tl = result.timeline
    opts = result.options
    addr = ""
    if tl.address:
        addr = f" · {tl.address[0]} ({tl.family})"
    rule = opts.connect_to_for(opts.target.host, opts.target.port)
    if rule is not None:
        addr += " · --connect-to {}:{}".format(
            *rule.destination(opts.target.host, opts.target.port)
        )
    console.print(
        Text.assemble(
            ("promptpath ", "bold"),
            f"→ {display_url(opts.target.url)}  "
            f"({opts.provider} · {opts.model} · as {opts.client} · {protocol_name(result)}{addr})",
        )
    )
    if opts.proxy_note:
        console.print(Text(f"PROXY  {opts.proxy_note}", style="dim"))
    note = cleartext_note(
        scheme=opts.target.scheme,
        key_sent=tl.request is not None and tl.request.key_sent,
        address=tl.address[0] if tl.address else None,
        target_host=opts.target.host,
        proxy_scheme=None if opts.proxy is None else opts.proxy.scheme,
    )
    if note:
        console.print(Text(f"KEY    {note}", style="yellow"))
    if opts.verbose:
        render_headers(console, result)
        hello = client_hello_line(tl)
        if hello is not None:
            console.print(Text(hello, style="dim"))
    total = None
    if result.warm is not None:  # cold and warm on one time axis, so the setup tax shows
        warm_tl = result.warm.timeline
        total = max(axis_ms(tl, compute(tl)), axis_ms(warm_tl, compute(warm_tl)))
    side_by_side = result.warm is not None and console.width >= SIDE_BY_SIDE_MIN_WIDTH
    if side_by_side and result.warm is not None:
        half = console.width // 2 - 2
        grid = Table.grid(padding=(0, 2))
        grid.add_row(
            waterfall(tl, compute(tl), half, "cold", total),
            waterfall(result.warm.timeline, compute(result.warm.timeline), half, "warm", total),
        )
        print_trimmed(console, grid)
    metrics = render_timeline(
        console, tl, "cold" if result.warm else "", total, with_waterfall=not side_by_side
    )
    if result.warm is not None:
        console.print()
        reused = result.warm.timeline.reused_connection
        warm_metrics = render_timeline(
            console,
            result.warm.timeline,
            "warm (same connection, same axis)"
            if reused
            else "warm (a new connection: the first one was not reusable; same axis)",
            total,
            with_waterfall=not side_by_side,
        )
        cold_ttft = metrics.milestones_ms.get("ttft")
        warm_ttft = warm_metrics.milestones_ms.get("ttft")
        if not reused:
            # Both requests paid the setup: a difference is no setup tax, only spread.
            console.print(
                "no setup tax measured: the server closed the first connection (or asked"
                " to), so the warm request opened a new one"
            )
        elif cold_ttft is not None and warm_ttft is not None:
            console.print(
                f"setup tax: cold TTFT {cold_ttft:.1f} ms vs warm {warm_ttft:.1f} ms"
                f" (Δ {cold_ttft - warm_ttft:.1f} ms)"
            )
    if result.h3 is not None:
        console.print(Text("h3     " + describe_h3(result.h3)))
    for f in result.findings:
        style = _VERDICT_STYLE.get(f.verdict, "white")
        console.print(
            Text.assemble(
                (f"[{f.verdict.value.upper()}] ", style), (f"{f.probe}: ", "bold"), f.summary
            )
        )
        for advice in f.advice:
            console.print(Text("    → " + advice))
        hops = path_table(f)
        if hops is not None:
            print_trimmed(console, hops)
        edges = edges_table(f)
        if edges is not None:
            print_trimmed(console, edges)
    return metrics
