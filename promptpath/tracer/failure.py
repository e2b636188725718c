"""From a failure to its stage and error: the one mapping every run uses.

A transport raises TransportError (or OSError) without knowing the run's stage; the
deadline raises TimeoutError. Here the stage comes from the timeline (the stage left
open, or the milestones reached), and the error a report shows from both. Pure: no
socket, no clock except the moment an error is stamped.
"""

from __future__ import annotations

import time

from promptpath.core.errors import (
    ConnectError,
    ErrorStage,
    PromptpathError,
    StreamError,
    TraceTimeout,
)
from promptpath.core.timeline import ErrorInfo, Timeline
from promptpath.net.transport import TransportError
from promptpath.options import RunOptions


def network_reason(reason: str, timeline: Timeline) -> str:
    """Words for a transport failure: how the peer closed (seen at the socket), and why."""
    close = timeline.close
    what = {
        "rst": "the peer reset the connection (RST)",
        "fin": "the peer closed the connection (FIN)",
        "tls_close_notify": "the peer closed the TLS session (close_notify)",
    }.get(close.kind if close is not None else "", "")
    return "; ".join(p for p in (what, reason.strip()) if p) or "connection failed"


def transport_error(
    err: TransportError | OSError, timeline: Timeline, options: RunOptions
) -> PromptpathError:
    """The one mapping from a transport's failure to a PromptpathError with its stage."""
    stage = phase_of(timeline, options)
    reason = err.reason if isinstance(err, TransportError) else str(err)
    if isinstance(err, TransportError) and err.protocol:
        return StreamError(
            f"HTTP protocol error in stage {stage!r}: {network_reason(reason, timeline)}",
            stage=stage,
            kind="protocol_error",
        )
    cls = ConnectError if stage in ("dns", "connect", "quic_handshake") else StreamError
    return cls(
        f"network error in stage {stage!r}: {network_reason(reason, timeline)}",
        stage=stage,
        kind="network_error",
    )


def timeout_error(options: RunOptions, stage: ErrorStage) -> TraceTimeout:
    """The error for a trace that --timeout cut short in ``stage`` (naming the proxy when
    the time ran out on the way to it or waiting for its answer)."""
    where = ""
    if options.proxy is not None and stage in ("proxy_dns", "proxy_connect", "proxy_tls", "tunnel"):
        where = f" (the proxy {options.proxy.url})"
    return TraceTimeout(
        f"timed out after {options.timeout:g} s in stage {stage!r}{where}",
        stage=stage,
        kind="timeout",
        timeout_s=options.timeout,
    )


def record_error(
    timeline: Timeline, exc: PromptpathError, *, at_ns: int | None = None
) -> PromptpathError:
    """Close the stages left open at ``at_ns`` (default now) and put ``exc``, stamped with
    that moment, on the timeline; return it."""
    now = time.perf_counter_ns() if at_ns is None else at_ns
    for stage in timeline.stages:
        if stage.end_ns is None:
            # A stage begun after the deadline (the loop was late to cancel) ends as it began.
            stage.end_ns, stage.ok = max(now, stage.start_ns), False
    timeline.error = ErrorInfo.from_error(exc, now)
    return exc


def phase_of(timeline: Timeline, options: RunOptions) -> ErrorStage:
    """The stage a trace was in, from the stage left open or the milestones it reached."""
    open_stage = timeline.current_stage
    if open_stage is not None:  # a recorded stage is one of the set-up's (StageName)
        return open_stage
    m = timeline.milestones
    quic = options.http == "3"
    proxied = options.proxy is not None
    if not timeline.reused_connection and "connected" not in m:
        if "dns_done" not in m:
            return "proxy_dns" if proxied else "dns"
        if proxied:
            return "proxy_connect" if timeline.stage("proxy_connect") is None else "tunnel"
        return "quic_handshake" if quic else "connect"
    https_over_tcp = options.target.scheme == "https" and not quic
    if https_over_tcp and not timeline.reused_connection and "tls_done" not in m:
        return "tls"
    if "request_sent" not in m:
        return "request"
    if "ttfb" not in m:
        return "wait"
    if "ttft" not in m:
        return "first_token"
    return "stream"


__all__ = ["network_reason", "phase_of", "record_error", "timeout_error", "transport_error"]
