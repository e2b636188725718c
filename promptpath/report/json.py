"""The --json reporter: one object per run, shaped by report/schema.json."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, cast

from promptpath.core.addr import fmt_addr
from promptpath.core.analysis import (
    Metrics,
    compute,
    headline,
    open_stage_at_error,
    reported_usage,
    response_model,
    stage_spans,
)
from promptpath.core.coalescing import coalescing
from promptpath.core.headers import SECRET_HEADERS
from promptpath.core.rtt import rtt_json
from promptpath.core.servertime import server_account, stream_time
from promptpath.core.stats import Summary
from promptpath.core.textsafe import valid_unicode_tree
from promptpath.core.timeline import (
    DNSAnswer,
    Interception,
    SentRequest,
    Timeline,
    TLSInfo,
    content_events,
)
from promptpath.core.verdict import run_line
from promptpath.core.wsclose import close_meaning
from promptpath.dialects.plugins import dialect
from promptpath.options import RunOptions, display_url
from promptpath.report.redact import Redactor, headers_json
from promptpath.result import TraceResult

if TYPE_CHECKING:
    from promptpath.core.slo import SLOResult  # a plain run never loads the SLO grammar

SCHEMA_VERSION = "promptpath.run/1"

#: Response headers worth passing on (hop hints, framing, caching); never cookies.
_HEADER_KEEP = {
    "content-type",
    "content-encoding",
    "content-length",
    "transfer-encoding",
    "server",
    "via",
    "x-cache",
    "cache-control",
    "alt-svc",
    "retry-after",
    "x-accel-buffering",
    "x-request-id",
    "request-id",
    "cf-ray",
}


#: Content events whose arrival the report lists one by one (the HTML/SVG token timeline);
#: past this the list stops and ``omitted`` counts the rest: the report stays bounded.
ARRIVALS_KEPT = 5000


def arrivals_json(timeline: Timeline) -> dict[str, Any]:
    """Each content event's arrival (ms from t0), which ones the path delivered coalesced
    (their index), and with the reference endpoint's stamps its send time on our clock."""
    content = content_events(timeline.events)
    kept = content[:ARRIVALS_KEPT]
    flags = coalescing(timeline).path_flags
    sent: list[float] | None = None
    if kept and all(e.server_sent_unix_ns is not None for e in kept):
        # Wall-clock send stamps moved onto the t0 axis: t0's wall time is t0_unix_ns.
        sent = [round(((e.server_sent_unix_ns or 0) - timeline.t0_unix_ns) / 1e6, 3) for e in kept]
    return {
        "at_ms": [round((e.t_ns - timeline.t0_ns) / 1e6, 3) for e in kept],
        "path_coalesced": [i for i, flag in enumerate(flags[: len(kept)]) if flag],
        "server_sent_ms": sent,
        "omitted": len(content) - len(kept),
    }


def _usage_json(timeline: Timeline) -> dict[str, int | None] | None:
    """The server's own token counts (null: it reported none)."""
    usage = reported_usage(timeline)
    if usage is None:
        return None
    return asdict(usage)


def _gaps(summary: Summary | None) -> dict[str, float] | None:
    if summary is None:
        return None
    return {
        k: round(getattr(summary, k), 3) for k in ("min", "p50", "p90", "p95", "p99", "max", "mean")
    }


def dns_json(answer: DNSAnswer | None, used_ip: str | None) -> dict[str, Any] | None:
    """The ``dns`` object of the JSON report: what resolved the name and which address was used."""
    if answer is None:
        return None
    return {
        "resolver": answer.resolver,
        "answers": [{"ip": ip, "family": fam} for ip, fam in answer.addresses],
        "used": used_ip,
        "ttl": answer.ttl,
        "cname_chain": list(answer.cname_chain),
        "duration_ms": round((answer.end_ns - answer.start_ns) / 1e6, 3),
    }


def _dns(timeline: Timeline) -> dict[str, Any] | None:
    """dns_json for a timeline, with the failure (kind, rcode, ...) when the lookup failed."""
    body = dns_json(timeline.dns, timeline.address[0] if timeline.address else None)
    failure = timeline.dns_error
    if body is not None and failure is not None:
        body["error"] = {k: v for k, v in asdict(failure).items() if v is not None}
    return body


def _intercepted(value: Interception | bool | None) -> dict[str, Any] | bool | None:
    """null: not judged; false: no sign of interception; else who and why."""
    if not isinstance(value, Interception):
        return value
    return {"by": value.by, "evidence": [asdict(e) for e in value.evidence]}


def _tls(timeline: Timeline) -> dict[str, Any] | None:
    return tls_json(timeline.tls)


def tls_json(tls: TLSInfo | None) -> dict[str, Any] | None:
    """The ``tls`` object: the origin's session, or an https:// proxy's."""
    if tls is None:
        return None
    cert = tls.cert
    return {
        "sni": tls.sni,
        "alpn_offered": list(tls.alpn_offered),
        "alpn": tls.alpn,
        "version": tls.version,
        "cipher": tls.cipher,
        "resumed": tls.resumed,
        "verified": tls.verified,
        "verify_error": tls.verify_error,
        "cert": None if cert is None else cert.as_dict(),
        "intercepted": _intercepted(tls.intercepted),
        "client_cert": _client_cert(tls),
    }


def _client_cert(tls: TLSInfo) -> dict[str, Any]:
    """mTLS: whether the server asked (null: not visible) and which certificate we sent."""
    sent = tls.client_cert
    return {
        "requested": tls.client_cert_requested,
        "sent": tls.client_cert_sent,
        "subject": None if sent is None else sent.subject,
        "issuer": None if sent is None else sent.issuer,
        "not_after": None if sent is None else sent.not_after,
        "days_left": None if sent is None else sent.days_left,
    }


def _proxy(timeline: Timeline) -> dict[str, Any] | None:
    proxy = timeline.proxy
    if proxy is None:
        return None
    stages = {
        s.name: round((s.end_ns - s.start_ns) / 1e6, 3)
        for s in timeline.stages
        if s.name in ("proxy_dns", "proxy_connect", "proxy_tls", "tunnel") and s.end_ns is not None
    }
    address = None
    if proxy.address is not None:
        address = fmt_addr(*proxy.address)
    return {
        "url": proxy.url,
        "source": proxy.source,
        "address": address,
        "tunnel": proxy.tunnel,
        "connect_status": proxy.status,
        "connect_reason": proxy.reason,
        "headers": headers_json(proxy.headers),
        "authenticated": proxy.authenticated,
        "stages_ms": stages,
        "tls": tls_json(proxy.tls),
    }


def websocket_json(timeline: Timeline) -> dict[str, Any] | None:
    """The ``websocket`` object: the upgrade's outcome, the messages, the close, and the
    ping round trips beside the TCP handshake's (null for an HTTP run)."""
    ws = timeline.websocket
    if ws is None:
        return None
    ms = timeline.ms

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 3)

    upgrade = timeline.stage("upgrade")
    rtts = [p.rtt_ns / 1e6 for p in ws.pings if p.rtt_ns is not None]
    handshake = timeline.stage("connect") or timeline.stage("proxy_connect")
    close = None
    if ws.close_by is not None:
        close = {
            "by": ws.close_by,
            "code": ws.close_code,
            "meaning": close_meaning(ws.close_code),
            "reason": ws.close_reason or None,
            "at_ms": rounded(ms(ws.close_ns)),
        }
    return {
        "upgrade_ms": None
        if upgrade is None or upgrade.duration_ns is None
        else round(upgrade.duration_ns / 1e6, 3),
        "subprotocols_offered": list(ws.subprotocols_offered),
        "subprotocol": ws.subprotocol,
        "extensions_offered": list(ws.extensions_offered),
        "extensions": list(ws.extensions),
        "messages_sent": ws.messages_sent,
        "sent_ms": rounded(ms(ws.sent_ns)),
        "messages": ws.messages,
        "fragmented": ws.fragmented,
        "binary": ws.binary,
        "control_frames": ws.control_frames,
        "close": close,
        "pings": {
            "sent": len(ws.pings),
            "answered": len(rtts),
            "rtt_ms": [round(r, 3) for r in rtts],
            "rtt_p50_ms": rounded(statistics.median(rtts)) if rtts else None,
            "rtt_max_ms": rounded(max(rtts)) if rtts else None,
            "tcp_connect_ms": None
            if handshake is None or handshake.duration_ns is None
            else round(handshake.duration_ns / 1e6, 3),
        },
    }


def _goaway(timeline: Timeline) -> dict[str, Any] | None:
    """The HTTP/2 GOAWAY this stream saw (code 0 with the stream at or below the last
    stream id: the server drained the connection and let the stream finish)."""
    g = timeline.goaway
    if g is None:
        return None
    return {
        "at_ms": round((g.t_ns - timeline.t0_ns) / 1e6, 3),
        "code": g.code,
        "last_stream_id": g.last_stream_id,
        "stream_id": g.stream_id,
    }


def _utc_iso(unix_ns: int) -> str:
    """t0 on the wall clock: HAR and JUnit want a date, our offsets are from t0."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(unix_ns / 1e9, UTC).isoformat(timespec="milliseconds")


def server_json(timeline: Timeline, metrics: Metrics) -> dict[str, Any] | None:
    """The ``server`` object: the time the server says it spent, split from the wait, and
    the request id and edge it named (null: its headers said none of it)."""
    acc = server_account(
        timeline.response_headers, metrics.stages_ms.get("wait"), stream_time(timeline)
    )
    if acc is None:
        return None
    network = acc.network_ms
    st = acc.stream_time
    return {
        "time": None if acc.time is None else asdict(acc.time),
        "wait_ms": acc.wait_ms,
        "network_ms": None if network is None else round(network, 3),
        "figures": [asdict(f) for f in acc.figures],
        "server_timing": [asdict(m) for m in acc.server_timing],
        "request_id": None
        if acc.request_id is None
        else {"header": acc.request_id[0], "value": acc.request_id[1]},
        "edge": [asdict(e) for e in acc.edge],
        "edge_name": None if acc.edge_name is None else asdict(acc.edge_name),
        "stream_time": None
        if st is None
        else {
            "ms": st.ms,
            "source": st.source,
            "measured_ms": None if st.measured_ms is None else round(st.measured_ms, 3),
            "outside_ms": None if st.outside_ms is None else round(st.outside_ms, 3),
        },
    }


def timeline_json(timeline: Timeline, metrics: Metrics | None = None) -> dict[str, Any]:
    """The per-request part of the report (shared by the cold and the warm request)."""
    metrics = metrics or compute(timeline)
    tok = metrics.tokens
    error_event = next((e.error for e in timeline.events if e.kind == "error"), None)
    return {
        "address": None
        if timeline.address is None
        else {"ip": timeline.address[0], "port": timeline.address[1], "family": timeline.family},
        "http_version": timeline.http_version,
        "status": timeline.status,
        "response_model": response_model(timeline),
        "reused_connection": timeline.reused_connection,
        "request": request_json(timeline.request),
        "started_at": _utc_iso(timeline.t0_unix_ns),
        "started_unix_ns": timeline.t0_unix_ns,
        "stages_ms": metrics.stages_ms,
        "spans_ms": [
            {"stage": key, "start": round(start, 3), "end": round(end, 3)}
            for key, start, end in stage_spans(timeline)
        ],
        "client_hello_ms": None
        if timeline.client_hello_ns is None
        else round(timeline.client_hello_ns / 1e6, 3),
        "server_flight_ms": None
        if timeline.server_flight_ns is None
        else round(timeline.server_flight_ns / 1e6, 3),
        "milestones_ms": metrics.milestones_ms,
        "ttft_ms": {
            "from_start": metrics.milestones_ms.get("ttft"),
            "from_request": metrics.ttft_from_request_ms,
        },
        "rtt_ms": metrics.rtt_ms,
        "rtt": rtt_json(timeline.rtt),
        "ttft_network_adjusted_ms": metrics.ttft_network_adjusted_ms,
        "first_output_network_adjusted_ms": metrics.first_output_network_adjusted_ms,
        "first_output_ms": {
            "from_start": metrics.milestones_ms.get("first_output"),
            "from_request": metrics.first_output_from_request_ms,
            "after_ttft": metrics.first_output_after_ttft_ms,
            "after": metrics.tokens.before_output or None,
        },
        "connect_attempts": [
            {
                "ip": a.ip,
                "family": a.family,
                "ms": round((a.end_ns - a.start_ns) / 1e6, 3),
                "error": a.error,
            }
            for a in timeline.attempts
        ],
        "dns": _dns(timeline),
        "tls": _tls(timeline),
        "tokens": {
            "count": tok.count,
            "count_source": tok.count_source,
            "events": tok.events,
            "coalesced": tok.coalesced,
            "coalesced_unjudged": tok.coalesced_unjudged,
            "mostly_coalesced": metrics.mostly_coalesced,
            "per_second": None if tok.per_second is None else round(tok.per_second, 3),
            "mean_itl_ms": None if tok.mean_itl_ms is None else round(tok.mean_itl_ms, 3),
            "content_types": tok.content_types,
            "hidden_reasoning_tokens": tok.hidden_reasoning,
            "usage": _usage_json(timeline),
            "gaps_ms": _gaps(tok.gap_summary),
            "gaps": [round(g, 3) for g in tok.gaps],
            "arrivals": arrivals_json(timeline),
        },
        "stream": {
            "end": timeline.stream_end,
            "error": error_event,
            "events": tok.all_events,
            "closed_ms": metrics.closed_ms,
            "closed_by": None if timeline.close is None else timeline.close.kind,
            "close_after_end": timeline.close_after_end,
            "goaway": _goaway(timeline),
            "filter_events": tok.filter_events,
            "stopped": None
            if metrics.stopped is None
            else {
                "reason": metrics.stopped.reason,
                "field": metrics.stopped.field,
                "prompt_blocked": metrics.stopped.prompt_blocked,
                "tokens_before": metrics.stopped.tokens_before,
            },
            "compressed": timeline.compressed,
            "bytes": timeline.body_bytes,
            "socket_reads": timeline.read_count,
            "cpu_wait_ms": None
            if timeline.cpu_wait_ns is None
            else round(timeline.cpu_wait_ns / 1e6, 3),
            "finished": tok.finished,
            "stall_ms": tok.stall_ms,
            "invalid_utf8": {
                "events": timeline.invalid_utf8.events,
                "replacements": timeline.invalid_utf8.replacements,
            },
            "decoded_bytes": timeline.decoded_bytes,
            "not_kept": {
                "events": timeline.not_kept.events,
                "content": timeline.not_kept.content,
                "text_chars": timeline.not_kept.text_chars,
                "reads": timeline.reads_not_kept.reads,
                "read_bytes": timeline.reads_not_kept.read_bytes,
                "chunks": timeline.reads_not_kept.chunks,
                "chunk_bytes": timeline.reads_not_kept.chunk_bytes,
            },
        },
        "response_headers": {
            k.lower(): v
            for k, v in timeline.response_headers
            if k.lower() in _HEADER_KEEP and k.lower() not in SECRET_HEADERS
        },
        "server": server_json(timeline, metrics),
        "quic": None if timeline.quic is None else asdict(timeline.quic),
        "websocket": websocket_json(timeline),
        "proxy": _proxy(timeline),
        "headline": headline(timeline, metrics),
        "error": None
        if timeline.error is None
        else {
            "stage": timeline.error.stage,
            "kind": timeline.error.kind,
            "message": timeline.error.message,
            "at_ms": None
            if timeline.error.t_ns is None
            else round((timeline.error.t_ns - timeline.t0_ns) / 1e6, 3),
            "cut_stage": open_stage_at_error(timeline),
        },
    }


def request_json(sent: SentRequest | None) -> dict[str, Any] | None:
    """The ``request`` object: what went on the wire, credential values redacted."""
    if sent is None:
        return None
    return {
        "method": sent.method,
        "path": sent.path,
        "headers": [{"name": n, "value": v} for n, v in sent.headers],
        "body_bytes": sent.body_bytes,
        "key_sent": sent.key_sent,
    }


def client_json(options: RunOptions, sent: SentRequest | None) -> dict[str, Any]:
    """The client shape the request copied, and what it carried once -H had its say (as
    the tracer recorded it; a run that never got as far as a request carries none)."""
    return {
        "as": options.client,
        "default_for_provider": options.client == dialect(options.provider).client,
        "user_agent": None if sent is None else sent.header("user-agent"),
        "accept": None if sent is None else sent.header("accept"),
        "accept_encoding": None if sent is None else sent.header("accept-encoding"),
        "not_offered": [] if sent is None else list(sent.not_offered),
        "http_preference": "auto" if sent is None else sent.http_preference,
    }


def result_json(
    result: TraceResult,
    *,
    exit_code: int,
    fail_on: str = "fail",
    slos: Sequence[SLOResult] = (),
) -> dict[str, Any]:
    """The ``promptpath.run/1`` object; its ``headline`` leads with what makes the run
    fail under ``fail_on`` and ``slos`` (the verdict line the terminal prints)."""
    opts = result.options
    body: dict[str, Any] = {
        "schema": SCHEMA_VERSION,
        "ok": result.ok and exit_code == 0,
        "exit_code": exit_code,
        "target": {
            "url": display_url(opts.target.url),
            "host": opts.target.host,
            "port": opts.target.port,
            "provider": opts.provider,
            "model": opts.model,
            "connect_to": _connect_to(result),
        },
    }
    body["client"] = client_json(opts, result.timeline.request)
    metrics = compute(result.timeline)
    body.update(timeline_json(result.timeline, metrics))
    body["proxy_note"] = opts.proxy_note
    body["warm"] = None if result.warm is None else timeline_json(result.warm.timeline)
    body["h3"] = result.h3
    body["findings"] = [f.as_dict() for f in result.findings]
    body["headline"] = run_line(
        result.timeline,
        metrics,
        findings=result.findings,
        fail_on=fail_on,
        slos=slos,
    )
    # Last, over the whole object: a key echoed anywhere (an error event, a finding's
    # evidence) leaves the values it sits in, and the JSON stays JSON. Lone surrogates
    # (a server's "\ud800") become U+FFFD here, so every export made from this object
    # (HAR, JUnit, Prometheus) gets valid Unicode too.
    return cast(dict[str, Any], valid_unicode_tree(Redactor.for_options(opts).mapping(body)))


def _connect_to(result: TraceResult) -> dict[str, Any] | None:
    """The --connect-to rule that sent this request elsewhere, and where, if one applied."""
    target = result.options.target
    rule = result.options.connect_to_for(target.host, target.port)
    if rule is None:
        return None
    host, port = rule.destination(target.host, target.port)
    return {"rule": rule.spec, "host": host, "port": port}


def dumps(obj: dict[str, Any]) -> str:
    """The JSON text of a report: valid Unicode whatever a server sent (no lone surrogate,
    which jq and strict parsers refuse; each becomes U+FFFD, as undecodable bytes do)."""
    return json.dumps(valid_unicode_tree(obj), indent=2, sort_keys=False, default=str)
