"""What the two framers (SSE, NDJSON) share: the cap on one line and its error.

A server, or a proxy that lost its mind, can send a line that never ends.  Without a
cap a framer buffers all of it; with one it gives up after ``MAX_LINE_BYTES`` and says
so, and ``StreamDecoder`` turns that into the dialect layer's ``MalformedEvent``.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Sequence

__all__ = ["INVALID_UTF8_MARK", "MAX_LINE_BYTES", "FrameTooLarge", "decode_counting"]

#: What an invalid UTF-8 sequence decodes to inside a framer, so the event it lands in
#: can count it before it becomes U+FFFD: U+FDD0 is a noncharacter, which Unicode
#: reserves for exactly this internal use (a stream that sends one is counted too).
INVALID_UTF8_MARK = "\ufdd0"


def _mark(exc: UnicodeError) -> tuple[str, int]:
    assert isinstance(exc, UnicodeDecodeError), "registered for decoding only"
    return INVALID_UTF8_MARK, exc.end


codecs.register_error("promptpath-mark", _mark)


def decode_counting(raw: bytes) -> tuple[str, int]:
    """``raw`` decoded as UTF-8 the way errors="replace" does (one U+FFFD per invalid
    sequence), and how many replacements that took."""
    text = raw.decode("utf-8", errors="promptpath-mark")
    count = text.count(INVALID_UTF8_MARK)
    return (text.replace(INVALID_UTF8_MARK, "\ufffd"), count) if count else (text, 0)


#: Longest line (and, for SSE, the most data one event may collect) a framer accepts.
#: 16 MiB, not 1: legitimate single lines reach megabytes (a base64 partial image in a
#: Responses stream, Ollama's ``context`` token array on a long /api/generate).
MAX_LINE_BYTES = 16 << 20

_HEAD = 100  # characters of the offending line kept for the error message


class FrameTooLarge(ValueError):
    """A line (or an SSE event's data) grew past ``limit``; the framer is now closed.

    ``frames`` are the frames that same ``feed()`` completed before the offending line;
    they are valid and were not returned, so the caller can still account for them.
    """

    def __init__(self, what: str, limit: int, head: str, frames: Sequence[object]) -> None:
        super().__init__(f"{what} longer than {limit} bytes")
        self.what = what  # "line" or "event data"
        self.limit = limit  # the cap, in bytes
        self.head = head  # the first characters of the offending line or event
        self.frames: list[object] = list(frames)


def head_of(fragments: Iterable[str]) -> str:
    """The first ``_HEAD`` characters of the joined ``fragments``, without joining all."""
    out: list[str] = []
    size = 0
    for fragment in fragments:
        out.append(fragment[: _HEAD - size])
        size += len(out[-1])
        if size >= _HEAD:
            break
    return "".join(out)
