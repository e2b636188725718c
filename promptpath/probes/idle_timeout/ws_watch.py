"""The idle-timeout probe over WebSocket: one traced response, then the same socket held
quiet (``WebSocketConnection.after``), optionally with our pings in the silence, until
the close or the cap. The verdict is ``ws_verdict``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import anyio

from promptpath.net.transport import TransportError
from promptpath.options import RunOptions
from promptpath.probes.idle_timeout.ws_verdict import QuietWatch
from promptpath.tracer.body import redact_for
from promptpath.tracer.ingest import snippet
from promptpath.tracer.orchestrator import Tracer, new_timeline, transport_for

PRIMING_PROMPT = "Say OK."
PROGRESS_EVERY_S = 10.0
#: Pings beyond the watch's own count (one more at each end, scheduling).
PING_MARGIN = 3
MAX_PINGS = 1000


def pinged_options(options: RunOptions, every_s: float | None, watch_s: float) -> RunOptions:
    """``options`` with our pings in the silence (or none at all: a user's --ws-ping-ms
    would keep the quiet socket from being quiet)."""
    if every_s is None:
        return options.derive(ws_pings=(None, 0))
    count = min(MAX_PINGS, math.ceil(watch_s / every_s) + PING_MARGIN)
    return options.derive(ws_pings=(every_s * 1000, count))


async def watch_quiet(
    options: RunOptions,
    *,
    cap_s: float,
    request_timeout: float,
    progress: Callable[[str], None],
    max_tokens: int = 16,
    ping_every_s: float | None = None,
    label: str = "",
) -> QuietWatch:
    """A complete response, then the WebSocket held quiet up to ``cap_s``.

    Bounded by ``request_timeout + cap_s``: the priming response has its deadline, the
    watch its cap."""
    priming = pinged_options(
        options.derive(prompt=PRIMING_PROMPT, max_tokens=max_tokens, timeout=request_timeout),
        ping_every_s,
        request_timeout + cap_s,
    )
    from promptpath.net.websocket import WebSocketConnection

    tracer = Tracer(priming, transport_for(priming))
    timeline = new_timeline()
    base = QuietWatch(cap_s=cap_s, ping_every_s=ping_every_s)
    try:
        exc = await tracer.request(timeline)
        conn, recorder = tracer.connection, tracer.recorder
        info = timeline.websocket
        server = timeline.header("server")
        server = None if server is None else snippet(server, 80, redact_for(options))
        if exc is not None or not isinstance(conn, WebSocketConnection) or info is None:
            why = exc.message if exc is not None else "no upgraded WebSocket"
            return QuietWatch(
                cap_s=cap_s, ping_every_s=ping_every_s, status=timeline.status, error=why
            )
        assert recorder is not None
        quiet_from = recorder.last_read_ns or time.perf_counter_ns()
        messages_before = info.messages
        closed: int | None = None
        if info.close_by is not None:  # closed with the response's end
            closed = info.close_ns or quiet_from
        else:
            closed = await _hold(conn, cap_s, quiet_from, progress, label)
        pongs = sum(1 for p in info.pings if p.pong_ns is not None)
        return QuietWatch(
            cap_s=base.cap_s,
            ping_every_s=ping_every_s,
            pings_sent=len(info.pings),
            pongs=pongs,
            status=timeline.status,
            server=server,
            quiet_from_ns=quiet_from,
            closed_ns=closed,
            close_by=None if closed is None or info.close_by == "client" else info.close_by,
            close_code=None if closed is None else info.close_code,
            close_reason=None if closed is None else info.close_reason,
            messages_while_quiet=info.messages - messages_before,
        )
    finally:
        await tracer.aclose()


async def _hold(
    conn: object, cap_s: float, quiet_from: int, progress: Callable[[str], None], label: str
) -> int | None:
    """Read the quiet socket until it closes (the close's stamp) or the cap (None)."""
    from promptpath.net.websocket import WebSocketConnection

    assert isinstance(conn, WebSocketConnection)
    body = conn.after()
    left = cap_s - (time.perf_counter_ns() - quiet_from) / 1e9
    closed = False
    async with anyio.create_task_group() as tg:

        async def tick() -> None:
            while True:
                await anyio.sleep(PROGRESS_EVERY_S)
                quiet = (time.perf_counter_ns() - quiet_from) / 1e9
                progress(
                    f"idle-timeout: WebSocket{label} quiet {quiet:.0f} s of ≤ {cap_s:g} s, open"
                )

        tg.start_soon(tick)
        with anyio.move_on_after(max(0.0, left)):
            try:
                async for _ in body:
                    pass  # a message in the silence is counted in the WebSocket's info
            except TransportError:
                pass  # the close, recorded in the WebSocket's info
            closed = True
        tg.cancel_scope.cancel()
    info = conn.recorder.timeline.websocket
    if not closed or info is None:
        return None
    return info.close_ns or time.perf_counter_ns()
