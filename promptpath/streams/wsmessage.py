"""WebSocket messages as frames for the dialects: one message is one event's JSON.

The transport hands over whole messages (fragments joined, each stamped with the read
that carried its last frame), so there is nothing to split: each ``feed`` is one
message. Text messages are UTF-8 by RFC 6455 §5.6 (wsproto refuses invalid UTF-8 with
1007 before it gets here); the decoding still counts replacements, as the other framers
do. Blank messages (a keepalive some servers send) make no frame.
"""

from __future__ import annotations

from promptpath.streams.framing import MAX_LINE_BYTES, FrameTooLarge, decode_counting
from promptpath.streams.ndjson import NDJSONLine

__all__ = ["MessageFramer"]


class MessageFramer:
    """``feed(message, t_ns) -> [NDJSONLine]``: one text message, one frame."""

    __slots__ = ("_bytes_seen", "_max")

    def __init__(self, *, max_line: int = MAX_LINE_BYTES) -> None:
        self._bytes_seen = 0
        self._max = max_line

    @property
    def bytes_seen(self) -> int:
        return self._bytes_seen

    @property
    def pending(self) -> bool:
        return False  # a message is whole or it was not handed over

    def feed(self, data: bytes, t_ns: int) -> list[NDJSONLine]:
        self._bytes_seen += len(data)
        if len(data) > self._max:
            head, _ = decode_counting(data[:100])
            raise FrameTooLarge("message", self._max, head, [])
        text, bad = decode_counting(data)
        if not text.strip():
            return []
        return [NDJSONLine(text=text, t_ns=t_ns, invalid_utf8=bad)]

    def close(self, t_ns: int) -> list[NDJSONLine]:
        return []
