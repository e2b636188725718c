"""The path's round trip as the kernel (or QUIC's loss recovery) measured it, and the
time to first token with one round trip taken off.

Pure: the transports read the estimates (net/tcprtt.py: ``TCP_INFO``; net/quic.py:
aioquic's RTT estimator through net/aioquic_internals.py) and hand them here.

Which round trip is subtracted: the minimum over the connection. Queueing and a peer's
delayed ACKs only ever lengthen a sample, never shorten it, so the minimum is the
closest to the path's own round trip; the first sample after the handshake and the
smoothed estimate at the stream's end are kept beside it. Through a forward proxy the
socket's peer is the proxy: its round trip is the proxy's hop, not the origin's, so it
is reported as such and nothing is subtracted (``hop: "proxy"``, ``rtt_ms`` null).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["PathRtt", "network_adjusted", "rtt_json", "wire_words"]

RttSource = Literal["tcp_info", "quic"]
RttHop = Literal["origin", "proxy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PathRtt:
    """The round-trip estimates of the connection one request went on (ms)."""

    source: RttSource
    #: the estimate right after the handshake (TCP: tcpi_rtt; QUIC: smoothed_rtt)
    first_ms: float | None
    #: the minimum over the connection, read at the stream's end (tcpi_min_rtt; min_rtt)
    min_ms: float | None
    #: the smoothed estimate at the stream's end (tcpi_rtt; smoothed_rtt)
    smoothed_ms: float | None
    #: whose round trip: the origin's, or a forward proxy's (the socket's peer)
    hop: RttHop = "origin"

    @property
    def used_ms(self) -> float | None:
        """The round trip subtracted from TTFT: the minimum (else the first sample, else
        the smoothed one); None through a proxy, whose hop is not the whole path."""
        if self.hop != "origin":
            return None
        for value in (self.min_ms, self.first_ms, self.smoothed_ms):
            if value is not None and value > 0:
                return value
        return None


def network_adjusted(from_request_ms: float | None, rtt_ms: float | None) -> float | None:
    """A time measured from the request's last byte, less one round trip (never below 0)."""
    if from_request_ms is None or rtt_ms is None:
        return None
    return round(max(0.0, from_request_ms - rtt_ms), 3)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def rtt_json(rtt: PathRtt | None) -> dict[str, Any] | None:
    """The run document's ``rtt`` object (null when no transport measured one)."""
    if rtt is None:
        return None
    return {
        "source": rtt.source,
        "hop": rtt.hop,
        "first_ms": _rounded(rtt.first_ms),
        "min_ms": _rounded(rtt.min_ms),
        "smoothed_ms": _rounded(rtt.smoothed_ms),
    }


def wire_words(rtt: PathRtt | None, adjusted_ms: float | None) -> str | None:
    """The TTFT split in words: ``≈ 912 ms at the server side, 38 ms on the wire``; through
    a proxy, whose round trip was read and that nothing was taken off. None without one."""
    if rtt is None:
        return None
    how = "TCP_INFO" if rtt.source == "tcp_info" else "QUIC"
    if rtt.hop == "proxy":
        hop = rtt.min_ms if rtt.min_ms is not None else rtt.first_ms
        figure = "" if hop is None else f" {hop:.1f} ms"
        return f"round trip{figure} ({how}) is the proxy's hop, not the origin's: TTFT not adjusted"
    used = rtt.used_ms
    if used is None or adjusted_ms is None:
        return None
    return (
        f"≈ {_figure(adjusted_ms)} ms at the server side, {_figure(used)} ms on the wire"
        f" (one round trip, {how})"
    )


def _figure(ms: float) -> str:
    """Whole milliseconds, with a tenth (or a hundredth on loopback) where they matter."""
    if ms >= 10:
        return f"{ms:.0f}"
    return f"{ms:.1f}" if ms >= 1 else f"{ms:.2f}"
