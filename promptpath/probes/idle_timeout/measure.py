"""What the idle-timeout probe observed, from stamps. Pure: no clock, no I/O.

* ``IdleWatch`` — one keep-alive connection held idle after a complete response, watched
  at the socket until the peer closes it (FIN, RST or TLS close_notify) or a cap passes;
  then, if still open, one request on it says whether it silently died.
* ``PauseRun`` — a stream from ``promptpath serve`` asked to fall silent after token K
  (canary mode), with its cut timed by ``measure_pause`` from the stream's timeline.

The verdict on them is in ``verdict``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from promptpath.core.timeline import Timeline, content_events

CLOCK_SLACK_NS = 50_000_000  # lags below -50 ms: server and client clocks disagree
SOCKET_RESOLUTION_S = 0.05  # stamps at the socket, timers in the hops: ±50 ms

CloseKind = Literal["fin", "rst", "close_notify"]
ReuseOutcome = Literal["ok", "reset", "closed", "timeout", "error"]
Outcome = Literal[
    "survived", "gateway_status", "fin", "rst", "clean_end", "h2_reset", "h3_reset", "stalled"
]
Method = Literal["server_send_time", "request_plan"]


@dataclass(frozen=True, slots=True, kw_only=True)
class IdleWatch:
    """What one keep-alive connection did after a complete response."""

    address: str  # "ip:port" we connected to
    tls: bool
    cap_s: float  # longest idle wait
    status: int | None = None  # status of the priming request
    response_end_ns: int | None = None  # last byte of the priming response
    connection_close: bool = False  # the response said "Connection: close"
    keep_alive_header: str | None = None  # "Keep-Alive: timeout=5", if the peer sent one
    closed_ns: int | None = None  # when the peer closed (None: still open at the cap)
    close_kind: CloseKind | None = None
    bytes_while_idle: int = 0  # bytes the peer sent while idle (an HTTP 408, say)
    idle_data: str = ""  # the start of those bytes
    reuse: ReuseOutcome | None = None  # the request on the old connection after the cap
    reuse_status: int | None = None
    reuse_detail: str = ""
    error: str | None = None  # the priming request failed: why

    @property
    def threshold_s(self) -> float | None:
        if self.closed_ns is None or self.response_end_ns is None:
            return None
        return round((self.closed_ns - self.response_end_ns) / 1e9, 3)


@dataclass(frozen=True, slots=True, kw_only=True)
class PauseRun:
    """One paused stream: did it survive, and if not, when and how was it cut."""

    pause_s: float
    keepalive_s: float  # SSE comment interval during the pause (0: none)
    outcome: Outcome | None  # None: the request failed for another reason (see error)
    status: int | None = None
    http_version: str | None = None
    silence_s: float | None = None  # from the last byte the server sent to the cut
    since_pause_s: float | None = None  # from the last token before the pause to the cut
    elapsed_s: float | None = None  # from the request being sent to the cut
    resolution_s: float = SOCKET_RESOLUTION_S
    method: Method = "server_send_time"
    pause_after: int = 0  # tokens the server sent before the pause
    tokens_before_cut: int = 0  # of those (and any after), how many reached us
    comments_seen: int = 0
    error: str | None = None

    @property
    def cut(self) -> bool:
        return self.outcome not in (None, "survived")


def _sent_on_our_clock(timeline: Timeline, sent_unix_ns: int) -> int:
    return sent_unix_ns - timeline.t0_unix_ns + timeline.t0_ns


def _cut_at_the_socket(timeline: Timeline) -> int | None:
    """When the connection ended: the close as the socket saw it (the FIN's kernel
    stamp), not when the error had climbed up to the tracer, which is as late as the
    event loop was busy (an idle-watch beside it, a collection, another process)."""
    close = timeline.close
    end = timeline.closed_ns
    if close is not None and (end is None or close.t_ns <= end):
        return close.t_ns
    return end


def measure_pause(
    timeline: Timeline,
    *,
    outcome: Outcome | None,
    pause_after: int,
    rate: float,
    pause_s: float,
    keepalive_s: float,
    error: str | None = None,
) -> PauseRun:
    """Times of one paused stream's cut, from its timeline.

    With comparable clocks (same machine, or NTP-close) the silence is measured from the
    server's own send stamp of the last event: a buffering hop that holds the last
    tokens cannot then shift it, nor can a hop that holds its own output after reading it
    (haproxy without ``http-no-delay``: the kernel corks each delivery up to 200 ms, and
    counting from our receive read its 3 s cut as 2.90 s). A hop *upstream* of the one
    that cuts and slow to pass events on makes this an over-estimate (a cold LiteLLM
    proxy: 0.2-0.3 s). The cut is the close as the socket stamped it. Otherwise it is
    estimated from when the request was sent and the pause plan (K tokens at ``rate``),
    which costs ±1/rate.
    """
    content = content_events(timeline.events)
    comments = [e for e in timeline.events if e.kind == "comment"]
    base = PauseRun(
        pause_s=pause_s,
        keepalive_s=keepalive_s,
        outcome=outcome,
        status=timeline.status,
        http_version=timeline.http_version,
        pause_after=pause_after,
        tokens_before_cut=len(content),
        comments_seen=len(comments),
        error=error,
    )
    m = timeline.milestones
    cut_ns: int | None = None
    if outcome == "gateway_status":
        cut_ns = m.get("ttfb")
    elif outcome in ("fin", "rst", "clean_end", "h2_reset", "h3_reset"):
        cut_ns = _cut_at_the_socket(timeline)
    if cut_ns is None:
        return base
    request_sent = m.get("request_sent", timeline.t0_ns)
    elapsed = (cut_ns - request_sent) / 1e9
    stamped = [e for e in timeline.events if e.server_sent_unix_ns is not None]
    lags = [e.t_ns - _sent_on_our_clock(timeline, e.server_sent_unix_ns or 0) for e in stamped]
    if stamped and min(lags) >= -CLOCK_SLACK_NS:
        last_sent = max(_sent_on_our_clock(timeline, e.server_sent_unix_ns or 0) for e in stamped)
        tokens_sent = [
            _sent_on_our_clock(timeline, e.server_sent_unix_ns or 0)
            for e in content
            if e.server_sent_unix_ns is not None
        ]
        pause_start = max(tokens_sent) if tokens_sent else last_sent
        return replace(
            base,
            silence_s=round((cut_ns - last_sent) / 1e9, 3),
            since_pause_s=round((cut_ns - pause_start) / 1e9, 3),
            elapsed_s=round(elapsed, 3),
            method="server_send_time",
            resolution_s=SOCKET_RESOLUTION_S,
        )
    # No usable stamps (a buffering hop dropped the held tokens, or clocks differ):
    # the pause began (K-1)/rate after the request reached the server.
    planned = max(0, pause_after - 1) / rate if rate > 0 else 0.0
    since_pause = elapsed - planned
    step = 1.0 / rate if rate > 0 else 0.0
    return replace(
        base,
        silence_s=round(since_pause, 3),
        since_pause_s=round(since_pause, 3),
        elapsed_s=round(elapsed, 3),
        method="request_plan",
        resolution_s=round(SOCKET_RESOLUTION_S + step, 3),
    )
