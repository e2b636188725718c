"""WebSocket close codes in words (RFC 6455 §7.4.1 and the IANA registry): pure data,
shared by the transport's error messages and the reports."""

from __future__ import annotations

__all__ = ["CLOSE_CODES", "close_meaning", "close_words"]

CLOSE_CODES: dict[int, str] = {
    1000: "normal closure",
    1001: "going away",
    1002: "protocol error",
    1003: "unsupported data",
    1005: "no status received",
    1006: "abnormal closure (no close frame)",
    1007: "invalid payload data",
    1008: "policy violation",
    1009: "message too big",
    1010: "mandatory extension",
    1011: "internal error",
    1012: "service restart",
    1013: "try again later",
    1014: "bad gateway",
    1015: "TLS handshake failure",
}


def close_meaning(code: int | None) -> str:
    """What a close code means ("application-defined" for 4000-4999)."""
    if code is None:
        return "no close code"
    name = CLOSE_CODES.get(code)
    if name is None:
        name = "application-defined" if 4000 <= code <= 4999 else "unregistered"
    return name


def close_words(code: int | None) -> str:
    """``1011 internal error``: a close code with its meaning."""
    return "no close code" if code is None else f"{code} {close_meaning(code)}"
