"""Which other dialect a stream would parse as: the hint for a wrong ``--provider``.

Pure: it decodes bytes already read, with fresh decoders, and reads no socket or clock.
"""

from __future__ import annotations

from promptpath.core.errors import StreamError
from promptpath.dialects.plugins import decoder_for
from promptpath.dialects.registry import NAMES, Provider
from promptpath.dialects.stream import StreamDecoder

__all__ = ["other_dialect", "provider_hint"]


def _parses_as(provider: Provider, data: bytes) -> bool:
    """The bytes decode as ``provider``'s stream with at least one token or its end marker
    and no malformed event: silence from a dialect that ignores unknown events is no match."""
    decoder = StreamDecoder(provider)
    try:
        events = decoder.feed(data, 0, 0) + decoder.close(0)
    except StreamError:
        return False
    return any(e.kind in ("content", "end") for e in events)


def other_dialect(data: bytes, provider: Provider) -> Provider | None:
    """The first dialect other than ``provider`` that parses ``data``, or None."""
    if not data:
        return None
    # Dialects on one wire format (openai and azure, gemini and vertex) parse alike.
    wire = type(decoder_for(provider))
    others = (p for p in NAMES if type(decoder_for(p)) is not wire)
    return next((p for p in others if _parses_as(p, data)), None)


def provider_hint(data: bytes, provider: Provider) -> str:
    """`` — it parses as … : try --provider …`` for a message, or "" without a match."""
    other = other_dialect(data, provider)
    if other is None:
        return ""
    return f" — the body parses as the {other} dialect: try --provider {other}"
