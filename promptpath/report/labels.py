"""Names a person reads for the stages, shared by every reporter (terminal, HTML, SVG)."""

from __future__ import annotations

#: Stage key -> label, in waterfall order (core.analysis.WATERFALL_STAGES).
STAGE_LABELS: dict[str, str] = {
    "proxy_dns": "proxy DNS",
    "proxy_connect": "proxy connect",
    "proxy_tls": "proxy TLS",
    "tunnel": "CONNECT tunnel",
    "dns": "DNS",
    "connect": "TCP connect",
    "tls": "TLS",
    "quic_handshake": "QUIC handshake",
    "request": "request",
    "wait": "wait (TTFB)",
    "first_token": "first token",
    "streaming": "streaming",
}

#: What -k means, where a ticket reader sees it.
UNVERIFIED = (
    "certificate not verified (-k): this run accepted whatever certificate the server sent,"
    " so it cannot tell a trusted server from an impostor"
)
