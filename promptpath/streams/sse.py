"""Server-sent events, parsed by the WHATWG HTML "event stream" rules, sans-IO.

Bytes and the instant they arrived go in; complete messages come out, each stamped
with the ``t_ns`` of the ``feed()`` call whose bytes completed it.  Nothing here reads
a clock or a socket.

We follow the specification exactly (https://html.spec.whatwg.org/#event-stream-interpretation)
with one addition: comment lines (``: keepalive``) are emitted as ``SSEMessage(comment=True)``
as soon as the line is complete, because keepalives are network evidence.  They do not
touch the event being assembled.

Spec points that surprise people, kept on purpose:

* ``id`` and ``retry`` are connection state, not event fields: a message reports the
  last event ID and reconnection time in force when it was dispatched (``None`` if the
  server never sent one).
* A ``data`` line with an empty value still makes a message (``data:\\n\\n`` dispatches
  ``data=""``); a block without any ``data`` line dispatches nothing.
* An event not terminated by a blank line before EOF is discarded; ``pending`` says so.

One limit the specification does not have: a line, and the data one event collects, may
not grow past ``max_line`` (``FrameTooLarge``).  It is counted in decoded characters,
each of which took at least one byte, so nothing shorter than the cap in bytes is refused.

One addition a dialect may ask for (``raw_json``): a JSON object written outside any
``data:`` line, over as many lines as it takes, is one message (``raw_json=True`` on it).
Gemini sends an error in a 200 stream that way, pretty-printed; google-genai reads each
line that does not start with ``data: `` into a buffer until the braces outside strings
balance, then parses it. Here such an object starts with a line whose first non-blank
character is ``{`` (the spec ignores that line as a field named ``{``); blank lines inside
it are skipped, as the SDK skips them.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NoReturn

from promptpath.streams.framing import INVALID_UTF8_MARK, MAX_LINE_BYTES, FrameTooLarge, head_of

__all__ = ["RawJSON", "SSEDecoder", "SSEMessage"]

#: CRLF must come first so a CR LF pair is one line break.
_EOL = re.compile(r"\r\n|\r|\n")
_RETRY = re.compile(r"[0-9]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class SSEMessage:
    """One dispatched event, or one comment line."""

    event: str  # event type; "message" when the block had no event field, "" for comments
    data: str  # data lines joined with "\n"; for a comment, its text
    id: str | None  # last event ID in force at dispatch (None: the server never set one)
    retry: int | None  # reconnection time (ms) in force at dispatch (None: never set)
    t_ns: int  # stamp of the feed() whose bytes completed the message
    comment: bool = False  # True for a ":" comment line
    invalid_utf8: int = 0  # invalid UTF-8 sequences replaced by U+FFFD in ``data``
    raw_json: bool = False  # a JSON object sent outside any data: line (see the module)


class SSEDecoder:
    """Incremental WHATWG event-stream parser: ``feed(bytes, t_ns) -> [SSEMessage]``."""

    __slots__ = (
        "_after_cr",
        "_at_start",
        "_bytes_seen",
        "_closed",
        "_data",
        "_data_len",
        "_event",
        "_fields_pending",
        "_id_buffer",
        "_invalid",
        "_last_id",
        "_max_line",
        "_partial",
        "_partial_len",
        "_raw",
        "_retry",
        "_utf8",
    )

    def __init__(self, *, max_line: int = MAX_LINE_BYTES, raw_json: bool = False) -> None:
        self._max_line = max_line
        #: The JSON object being collected outside data: lines; None: not asked for.
        self._raw: RawJSON | None = RawJSON() if raw_json else None
        # Invalid sequences become U+FFFD, as the spec's UTF-8 decode does, by way of a
        # mark that the message they land in counts first (framing.INVALID_UTF8_MARK).
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="promptpath-mark")
        self._at_start = True  # no text decoded yet: a leading BOM is still to be stripped
        self._partial: list[str] = []  # fragments of the current, unterminated line
        self._partial_len = 0  # their total length, kept so the cap check is O(1)
        self._after_cr = False  # last line ended in CR at a chunk end: skip one leading LF
        self._data: list[str] = []
        self._data_len = 0  # length of "\n".join(self._data)
        self._event = ""
        self._id_buffer: str | None = None
        self._last_id: str | None = None
        self._retry: int | None = None
        self._fields_pending = False  # a field line arrived since the last blank line
        self._invalid = 0  # invalid UTF-8 sequences in the lines of the pending event
        self._bytes_seen = 0
        self._closed = False

    # -- public ------------------------------------------------------------------------
    @property
    def bytes_seen(self) -> int:
        """Bytes fed so far."""
        return self._bytes_seen

    @property
    def pending(self) -> bool:
        """Bytes or fields are buffered that no dispatched message accounts for."""
        raw = self._raw is not None and bool(self._raw.lines)
        return self._fields_pending or raw or any(self._partial) or bool(self._utf8.getstate()[0])

    @property
    def last_event_id(self) -> str | None:
        return self._last_id

    @property
    def retry(self) -> int | None:
        return self._retry

    def feed(self, data: bytes, t_ns: int) -> list[SSEMessage]:
        """Parse ``data`` (arrived at ``t_ns``); return the messages it completed.

        Raises ``FrameTooLarge`` (and closes) when a line or an event's data exceeds
        ``max_line``.
        """
        if self._closed:
            raise RuntimeError("SSEDecoder.feed() after close() or FrameTooLarge")
        self._bytes_seen += len(data)
        text = self._utf8.decode(data)
        if not text:
            return []
        if self._at_start:
            # The decoder only yields whole characters, so a BOM split across feeds
            # still arrives here as one U+FEFF; strip exactly one.
            self._at_start = False
            if text[0] == "\ufeff":
                text = text[1:]
                if not text:
                    return []
        return self._consume(text, t_ns)

    def close(self, t_ns: int) -> list[SSEMessage]:
        """End of stream.  An unterminated event is discarded (see ``pending``)."""
        if not self._closed:
            self._closed = True
            # A truncated multi-byte character becomes U+FFFD in the partial line, so
            # ``pending`` still reports it; it can never complete a line.
            tail = self._utf8.decode(b"", final=True)
            if tail:
                self._partial.append(tail)
        return []

    # -- line splitting ----------------------------------------------------------------
    def _consume(self, text: str, t_ns: int) -> list[SSEMessage]:
        out: list[SSEMessage] = []
        pos = 0
        end = len(text)
        if self._after_cr:
            self._after_cr = False
            if text[0] == "\n":  # the LF of a CRLF split across two feeds
                pos = 1
        partial = self._partial
        search = _EOL.search
        while pos < end:
            m = search(text, pos)
            if m is None:
                partial.append(text[pos:])
                self._partial_len += end - pos
                if self._partial_len > self._max_line:
                    self._too_large("line", partial, out)
                break
            line = text[pos : m.start()]
            if partial:
                partial.append(line)
                line = "".join(partial)
                partial.clear()
                self._partial_len = 0
            if len(line) > self._max_line:
                self._too_large("line", [line], out)
            self._line(line, t_ns, out)
            pos = m.end()
            if pos == end and text[pos - 1] == "\r":
                self._after_cr = True
        return out

    # -- the spec's per-line steps -----------------------------------------------------
    def _line(self, line: str, t_ns: int, out: list[SSEMessage]) -> None:
        raw = self._raw
        if not line:
            if raw is None or not raw.lines:  # inside a raw JSON object: skipped
                self._dispatch(t_ns, out)
            return
        invalid = 0
        if INVALID_UTF8_MARK in line:
            invalid = line.count(INVALID_UTF8_MARK)
            line = line.replace(INVALID_UTF8_MARK, "\ufffd")
        if raw is not None and (raw.lines or line.lstrip()[:1] == "{"):
            if raw.add(line, invalid):
                self._raw_message(raw, t_ns, out)
            elif raw.size > self._max_line:
                self._too_large("event data", raw.lines, out)
            return
        if line[0] == ":":
            body = line[1:]
            if body[:1] == " ":
                body = body[1:]
            out.append(
                SSEMessage(
                    event="",
                    data=body,
                    id=self._last_id,
                    retry=self._retry,
                    t_ns=t_ns,
                    comment=True,
                    invalid_utf8=invalid,
                )
            )
            return
        self._invalid += invalid
        name, colon, value = line.partition(":")
        if colon and value[:1] == " ":
            value = value[1:]
        self._fields_pending = True
        if name == "data":
            self._data_len += len(value) + (1 if self._data else 0)
            self._data.append(value)
            if self._data_len > self._max_line:
                # The head shows the data as a dialect would get it: lines joined by LF.
                self._too_large("event data", (v[:100] + "\n" for v in self._data), out)
        elif name == "event":
            self._event = value
        elif name == "id" and "\x00" not in value:
            self._id_buffer = value
        elif name == "retry" and _RETRY.fullmatch(value):
            self._retry = int(value)
        # any other field name, an id with NUL, a retry with non-digits: ignored

    def _raw_message(self, raw: RawJSON, t_ns: int, out: list[SSEMessage]) -> None:
        text, invalid = raw.take()
        if len(text) > self._max_line:
            self._too_large("event data", [text], out)
        out.append(
            SSEMessage(
                event="message",
                data=text,
                id=self._last_id,
                retry=self._retry,
                t_ns=t_ns,
                invalid_utf8=invalid,
                raw_json=True,
            )
        )

    def _too_large(self, what: str, fragments: Iterable[str], out: list[SSEMessage]) -> NoReturn:
        head = head_of(fragments)
        # Give the memory back at once: the caller abandons this stream anyway.  What
        # was dropped is accounted for by no message, so ``pending`` stays True.
        self._closed = True
        self._partial.clear()
        self._partial_len = 0
        self._data = []
        self._data_len = 0
        if self._raw is not None:
            self._raw.take()
        self._fields_pending = True
        raise FrameTooLarge(what, self._max_line, head, out)

    def _dispatch(self, t_ns: int, out: list[SSEMessage]) -> None:
        self._fields_pending = False
        self._last_id = self._id_buffer
        invalid, self._invalid = self._invalid, 0
        if not self._data:
            self._event = ""
            return
        out.append(
            SSEMessage(
                event=self._event or "message",
                data="\n".join(self._data),
                id=self._last_id,
                retry=self._retry,
                t_ns=t_ns,
                invalid_utf8=invalid,
            )
        )
        self._data = []
        self._data_len = 0
        self._event = ""


class RawJSON:
    """The lines of one JSON object sent outside data: lines, until its braces balance
    (braces inside strings, escapes included, do not count)."""

    __slots__ = ("depth", "escaped", "in_string", "invalid", "lines", "size")

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.size = 0  # the lines joined by LF: what the message's data will be
        self.invalid = 0
        self.depth = 0
        self.in_string = False
        self.escaped = False

    def add(self, line: str, invalid: int) -> bool:
        """Take one line; whether the object is complete with it."""
        for ch in line:
            if self.in_string:
                if self.escaped:
                    self.escaped = False
                elif ch == "\\":
                    self.escaped = True
                elif ch == '"':
                    self.in_string = False
            elif ch == '"':
                self.in_string = True
            elif ch == "{":
                self.depth += 1
            elif ch == "}":
                self.depth -= 1
        self.size += len(line) + (1 if self.lines else 0)
        self.lines.append(line)
        self.invalid += invalid
        # A stray closing brace ends it too: what is collected is then parsed (and found
        # malformed) rather than held until the stream ends.
        return self.depth <= 0

    def take(self) -> tuple[str, int]:
        """The object's text and its invalid UTF-8 count; the buffer starts again."""
        text, invalid = "\n".join(self.lines), self.invalid
        self.lines, self.size, self.invalid = [], 0, 0
        self.depth, self.in_string, self.escaped = 0, False, False
        return text, invalid
