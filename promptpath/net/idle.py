"""An idle connection watched at the socket: when, and how, does the peer close it?

After a complete response a keep-alive connection sits idle; a connection pool would
notice its end only on reuse, if at all. ``watch_closed`` keeps reading the idle stream
itself: the read that returns EOF (FIN, or TLS close_notify) or fails with ECONNRESET
(RST) is the close, stamped by the stamping stream below TLS (``Timeline.close``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import httpcore

from promptpath.core.timeline import CloseKind
from promptpath.net.backend import TracedNetworkStream
from promptpath.net.transport import Recorder

#: Bytes of idle-time data kept (an HTTP 408 status line, say).
IDLE_DATA_KEEP = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class IdleEnd:
    """How an idle watch ended."""

    closed_ns: int | None  # when the peer closed (None: still open at the deadline)
    close_kind: CloseKind | None
    nbytes: int  # bytes the peer sent while idle
    data: bytes  # the first IDLE_DATA_KEEP of them


async def watch_closed(
    stream: TracedNetworkStream,
    recorder: Recorder,
    until_ns: int,
    *,
    tick_s: float,
    on_tick: Callable[[], None],
) -> IdleEnd:
    """Read the idle stream until the peer closes it or ``until_ns`` passes.

    ``on_tick`` is called every ``tick_s`` seconds while the connection is still open."""
    received = b""
    nbytes = 0
    while (now := time.perf_counter_ns()) < until_ns:
        with anyio.move_on_after(min((until_ns - now) / 1e9, tick_s)) as scope:
            try:
                data = await stream.read(65536)
            except (httpcore.ReadError, OSError):
                data = b""  # a reset: the stamping stream below has recorded it
            if not data:
                close = recorder.timeline.close
                if close is None:  # closed without a word at the socket: call it a FIN
                    recorder.closed("fin")
                    close = recorder.timeline.close
                assert close is not None
                return IdleEnd(
                    closed_ns=close.t_ns,
                    close_kind=close.kind,
                    nbytes=nbytes,
                    data=received[:IDLE_DATA_KEEP],
                )
            nbytes += len(data)
            received += data[: max(0, IDLE_DATA_KEEP - len(received))]
        if scope.cancelled_caught:
            on_tick()
    return IdleEnd(closed_ns=None, close_kind=None, nbytes=nbytes, data=received)


__all__ = ["IDLE_DATA_KEEP", "IdleEnd", "watch_closed"]
