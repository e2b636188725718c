"""Newline-delimited JSON framing (Ollama), sans-IO: bytes and stamps in, lines out.

Only LF ends a line (a CR before it is dropped), so a line can be split anywhere,
including inside a multi-byte character: we split bytes first and decode whole lines.
A line longer than ``max_line`` bytes before its LF raises ``FrameTooLarge``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

from promptpath.streams.framing import MAX_LINE_BYTES, FrameTooLarge, decode_counting, head_of

__all__ = ["NDJSONDecoder", "NDJSONLine"]


@dataclass(frozen=True, slots=True)
class NDJSONLine:
    """One non-blank line, without its terminator."""

    text: str
    t_ns: int  # stamp of the feed() that carried the line's last byte
    invalid_utf8: int = 0  # invalid UTF-8 sequences replaced by U+FFFD in this line


class NDJSONDecoder:
    """Incremental NDJSON line splitter: ``feed(bytes, t_ns) -> [NDJSONLine]``."""

    __slots__ = (
        "_at_start",
        "_bytes_seen",
        "_closed",
        "_last_t_ns",
        "_max_line",
        "_nonblank",
        "_partial",
        "_partial_len",
    )

    def __init__(self, *, max_line: int = MAX_LINE_BYTES) -> None:
        self._max_line = max_line
        self._partial: list[bytes] = []
        self._partial_len = 0  # bytes in _partial, kept so the cap check is O(1)
        self._nonblank = False  # _partial holds more than whitespace (kept O(1) to ask)
        self._last_t_ns: int | None = None  # stamp of the last feed that added to _partial
        self._bytes_seen = 0
        self._at_start = True
        self._closed = False

    @property
    def bytes_seen(self) -> int:
        return self._bytes_seen

    @property
    def pending(self) -> bool:
        """An unterminated, non-blank line is buffered."""
        return self._nonblank

    def feed(self, data: bytes, t_ns: int) -> list[NDJSONLine]:
        """Split ``data`` (arrived at ``t_ns``); return the lines it completed.

        Raises ``FrameTooLarge`` (and closes) when a line exceeds ``max_line`` bytes.
        """
        if self._closed:
            raise RuntimeError("NDJSONDecoder.feed() after close() or FrameTooLarge")
        self._bytes_seen += len(data)
        out: list[NDJSONLine] = []
        pos = 0
        while True:
            nl = data.find(b"\n", pos)
            if nl < 0:
                break
            piece = data[pos:nl]
            if self._partial:
                self._partial.append(piece)
                piece = b"".join(self._partial)
                self._partial.clear()
                self._partial_len = 0
                self._nonblank = False
            # A CR before the LF counts: the partial check below cannot know it is one.
            if len(piece) > self._max_line:
                self._too_large([piece], out)
            self._emit(piece, t_ns, out)
            pos = nl + 1
        if pos < len(data):
            rest = data[pos:]
            self._partial.append(rest)
            self._partial_len += len(rest)
            if self._partial_len > self._max_line:
                self._too_large(self._partial, out)
            self._nonblank = self._nonblank or bool(rest.strip())
            self._last_t_ns = t_ns
        return out

    def close(self, t_ns: int) -> list[NDJSONLine]:
        """End of stream: Ollama's last line may lack its LF; return it if non-blank.

        That line keeps the stamp of the feed that carried its last byte, not ``t_ns``
        (the EOF instant): the content arrived then, and a late FIN must not move it.
        """
        if self._closed:
            return []
        self._closed = True
        out: list[NDJSONLine] = []
        if self._partial:
            piece = b"".join(self._partial)
            self._partial.clear()
            self._nonblank = False
            self._emit(piece, t_ns if self._last_t_ns is None else self._last_t_ns, out)
        return out

    def _too_large(self, fragments: list[bytes], out: list[NDJSONLine]) -> NoReturn:
        head = head_of(f[:200].decode("utf-8", errors="replace") for f in fragments)
        # Give the memory back at once: the caller abandons this stream anyway.  The
        # dropped line is still unaccounted for, so ``pending`` stays True.
        self._closed = True
        self._partial.clear()
        self._partial_len = 0
        self._nonblank = True
        raise FrameTooLarge("line", self._max_line, head, out)

    def _emit(self, raw: bytes, t_ns: int, out: list[NDJSONLine]) -> None:
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        text, invalid = decode_counting(raw)
        if self._at_start:  # a BOM can only lead the first line of the stream
            self._at_start = False
            if text.startswith("\ufeff"):
                text = text[1:]
        if text.strip():
            out.append(NDJSONLine(text, t_ns, invalid))
