"""Which content types are a stream promptpath reads: one table for the ingest and the probes."""

from __future__ import annotations

from typing import Literal

StreamFormat = Literal["sse", "ndjson", "eventstream"]

#: Amazon Bedrock's binary framing (streams/eventstream.py).
EVENTSTREAM = "application/vnd.amazon.eventstream"

#: Content codings the ingest decodes (zlib): the only ones a request may offer.
DECODABLE = frozenset({"gzip", "x-gzip", "deflate"})

#: Media types of an event stream, and how it is framed (RFC 9110 §8.3.1: the type and
#: subtype are case-insensitive; parameters such as ``charset`` do not change it).
STREAM_TYPES: dict[str, StreamFormat] = {
    "text/event-stream": "sse",
    "application/x-ndjson": "ndjson",
    "application/ndjson": "ndjson",
    "application/jsonl": "ndjson",
    "application/json-lines": "ndjson",
    EVENTSTREAM: "eventstream",
}


def media_type(content_type: str | None) -> str:
    """``type/subtype`` of a Content-Type value, lowercased, without parameters ("" if none)."""
    return (content_type or "").split(";")[0].strip().lower()


def stream_format(content_type: str | None) -> StreamFormat | None:
    """How a body of this Content-Type is framed as a stream, or None when it is not one."""
    return STREAM_TYPES.get(media_type(content_type))


__all__ = [
    "DECODABLE",
    "EVENTSTREAM",
    "STREAM_TYPES",
    "StreamFormat",
    "media_type",
    "stream_format",
]
