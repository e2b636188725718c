"""The keep-alive half of the idle-timeout probe: one real request, then an idle socket.

The priming request is an ordinary traced request (the tracer, HTTP/1.1 over the TCP
transport: keep-alive idling is what HTTP/1.1 connections do between requests); then
``net.idle.watch_closed`` reads the idle connection until the peer closes it or the cap
passes. If nothing closed, one more request on the same connection tells whether it is
still alive or silently died in a middlebox.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from promptpath.core.addr import fmt_addr
from promptpath.core.errors import PromptpathError, TraceTimeout
from promptpath.core.timeline import Timeline
from promptpath.net.http import TCPConnection, TCPTransport
from promptpath.net.idle import IdleEnd, watch_closed
from promptpath.options import RunOptions
from promptpath.probes.idle_timeout.measure import CloseKind, IdleWatch, ReuseOutcome
from promptpath.tracer.orchestrator import Tracer, new_timeline

#: How often the watch reports that the connection is still open.
PROGRESS_EVERY_S = 10.0
#: The prompt of the priming request: a small real answer.
PRIMING_PROMPT = "Say OK."

_CLOSE_WORDS: dict[str, CloseKind] = {
    "fin": "fin",
    "rst": "rst",
    "tls_close_notify": "close_notify",
}


async def watch_idle(
    options: RunOptions,
    *,
    cap_s: float,
    request_timeout: float,
    progress: Callable[[str], None],
    max_tokens: int = 16,
) -> IdleWatch:
    """Complete one request, hold the connection idle up to ``cap_s``, say how it ended.

    Bounded by ``cap_s + 2 * request_timeout``: connecting and the priming exchange share
    one deadline, the re-use request (only when nothing closed) has another.
    """
    priming = options.derive(
        http="1.1",
        prompt=PRIMING_PROMPT,
        max_tokens=max_tokens,
        timeout=request_timeout,
    )
    tls = options.target.scheme == "https"
    tracer = Tracer(priming, TCPTransport())
    first = new_timeline()
    try:
        exc = await tracer.request(first)
        conn = tracer.connection
        address = fmt_addr(*first.address) if first.address else ""
        if first.status is None or not isinstance(conn, TCPConnection):
            stage = "connect" if first.address is None else "the priming request"
            why = exc.message if exc is not None else "no response"
            return IdleWatch(address=address, tls=tls, cap_s=cap_s, error=f"{stage} failed: {why}")
        assert tracer.recorder is not None
        end_ns = tracer.recorder.last_read_ns or time.perf_counter_ns()
        watch = IdleWatch(
            address=address,
            tls=tls,
            cap_s=cap_s,
            status=first.status,
            response_end_ns=end_ns,
            connection_close=conn.closed_by_http,
            keep_alive_header=first.header("keep-alive"),
        )
        if watch.connection_close:
            return watch

        def tick() -> None:
            idle_s = (time.perf_counter_ns() - end_ns) / 1e9
            if idle_s < cap_s:
                progress(f"idle-timeout: connection idle {idle_s:.0f} s of ≤ {cap_s:g} s, open")

        idle = await watch_closed(
            conn.stream,
            tracer.recorder,
            end_ns + int(cap_s * 1e9),
            tick_s=PROGRESS_EVERY_S,
            on_tick=tick,
        )
        watch = _with_idle(watch, idle)
        if idle.closed_ns is not None:
            return watch
        if idle.nbytes:
            return dataclasses.replace(
                watch, reuse="error", reuse_detail="peer sent data while idle"
            )
        progress(f"idle-timeout: still open after {cap_s:g} s idle; one request to check it")
        return await _reuse(tracer, watch)
    finally:
        await tracer.aclose()


def _with_idle(watch: IdleWatch, idle: IdleEnd) -> IdleWatch:
    return dataclasses.replace(
        watch,
        closed_ns=idle.closed_ns,
        close_kind=None if idle.close_kind is None else _CLOSE_WORDS.get(idle.close_kind, "fin"),
        bytes_while_idle=idle.nbytes,
        idle_data=idle.data.decode("latin-1"),
    )


async def _reuse(tracer: Tracer, watch: IdleWatch) -> IdleWatch:
    """One request on the old connection: is it still alive after the idle cap?"""
    conn = tracer.connection
    if conn is None or not conn.reusable:
        # Readable while idle-watched and not closed: the peer spoke or closed just now.
        return dataclasses.replace(watch, reuse="closed", reuse_detail="closed at the cap")
    timeline = new_timeline()
    exc = await tracer.request(timeline)
    outcome, detail = _reuse_outcome(exc, timeline)
    return dataclasses.replace(
        watch, reuse=outcome, reuse_status=timeline.status, reuse_detail=detail
    )


def _reuse_outcome(exc: PromptpathError | None, timeline: Timeline) -> tuple[ReuseOutcome, str]:
    if timeline.status is not None:
        return "ok", ""  # it answered: alive, whatever it said
    if isinstance(exc, TraceTimeout):
        return "timeout", f"no answer within {exc.detail.get('timeout_s')} s"
    close = timeline.close
    if close is not None:
        return ("reset" if close.kind == "rst" else "closed"), f"peer {close.kind}"
    if timeline.reused_connection is False:
        return "closed", "the old connection was gone: the request opened a new one"
    message = exc.message if exc is not None else "no answer"
    return "error", message
