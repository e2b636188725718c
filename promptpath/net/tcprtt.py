"""The kernel's round-trip estimates of a TCP connection (``TCP_INFO``).

``struct tcp_info`` (linux/tcp.h): 8 one-byte fields, then u32s; ``tcpi_rtt`` and
``tcpi_rttvar`` (µs, the smoothed estimate and its variance) are the 18th and 19th, at
offsets 68 and 72; ``tcpi_min_rtt`` (µs, the windowed minimum over the connection, Linux
4.10+) sits at 148, after the u64 pacing and byte counters. An older kernel returns a
shorter struct: what it lacks reads as None.
"""

from __future__ import annotations

import socket
import struct
import sys

from promptpath.core.rtt import PathRtt

__all__ = ["TcpRtt", "parse_tcp_info", "path_rtt", "read_tcp_rtt"]

_RTT = struct.Struct("=68xII")  # tcpi_rtt, tcpi_rttvar
_MIN_RTT = struct.Struct("=148xI")  # tcpi_min_rtt
_WANTED = _MIN_RTT.size


class TcpRtt:
    """``tcpi_rtt`` and ``tcpi_min_rtt`` in ms (None where the kernel did not say)."""

    __slots__ = ("min_ms", "smoothed_ms")

    def __init__(self, smoothed_ms: float | None, min_ms: float | None) -> None:
        self.smoothed_ms = smoothed_ms
        self.min_ms = min_ms


def parse_tcp_info(raw: bytes) -> TcpRtt | None:
    """The RTT fields of a ``TCP_INFO`` answer; None when it is too short to hold them."""
    if len(raw) < _RTT.size:
        return None
    rtt_us, _var = _RTT.unpack_from(raw)
    min_us = _MIN_RTT.unpack_from(raw)[0] if len(raw) >= _MIN_RTT.size else 0
    # 0 means no sample yet; the kernel's "no minimum" is ~0U.
    smoothed = rtt_us / 1000 if rtt_us else None
    minimum = min_us / 1000 if 0 < min_us < 0xFFFFFFFF else None
    return TcpRtt(smoothed, minimum)


def read_tcp_rtt(sock: socket.socket | None) -> TcpRtt | None:
    """The kernel's estimates for ``sock`` now; None off Linux or on a closed socket."""
    if sock is None or sys.platform != "linux" or sock.fileno() < 0:
        return None
    try:
        raw = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _WANTED)
    except (OSError, AttributeError):
        return None
    return parse_tcp_info(raw)


def path_rtt(
    sock: socket.socket | None, first_ms: float | None, *, via_proxy: bool
) -> PathRtt | None:
    """A connection's estimates at its stream's end, with the one read after its handshake.

    Through a forward proxy the socket's peer is the proxy: the round trip is its hop's,
    and is said to be (core/rtt.py subtracts nothing then)."""
    now = read_tcp_rtt(sock)
    if now is None and first_ms is None:
        return None
    return PathRtt(
        source="tcp_info",
        first_ms=first_ms,
        min_ms=None if now is None else now.min_ms,
        smoothed_ms=None if now is None else now.smoothed_ms,
        hop="proxy" if via_proxy else "origin",
    )
