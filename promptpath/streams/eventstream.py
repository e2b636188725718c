"""AWS event stream (``application/vnd.amazon.eventstream``) framing, sans-IO.

Amazon Bedrock's streaming APIs answer with this binary framing instead of SSE. Each
message is::

    prelude   total length (uint32 BE) | headers length (uint32 BE) | CRC32 of those 8 bytes
    headers   repeated: name length (uint8), name (UTF-8), value type (uint8), value
    payload   total - headers - 16 bytes (JSON for Bedrock)
    trailer   CRC32 of every byte of the message before it

Bytes and the instant they arrived go in; complete messages come out, each stamped with
the ``t_ns`` of the ``feed()`` whose bytes completed it. Nothing here reads a clock.

What surprises people:

- Both CRCs are checked (the prelude's before a byte of the body is waited for): a CRC
  that does not match, or a length no message can have, is a ``bad_frame`` decode error
  naming the byte offset of the message in the body, and the decoder stays closed
  (nothing after a broken length can be framed again).
- The lengths are read before the message is buffered, so a prelude that announces
  100 MB is refused at once (``MAX_MESSAGE_BYTES``): memory stays bounded whatever the
  first 12 bytes say. botocore's limits are the same in spirit (headers at most 128 KiB,
  payload at most 24 MiB).
- Header values are typed (booleans carry no bytes, strings and byte arrays a uint16
  length, timestamps are int64 milliseconds, UUIDs 16 bytes); a type outside 0-9 is a
  decode error too.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass

from promptpath.core.errors import StreamError
from promptpath.core.timeline import StreamEvent
from promptpath.streams.framing import decode_counting

__all__ = [
    "MAX_HEADERS_BYTES",
    "MAX_MESSAGE_BYTES",
    "EventStreamDecoder",
    "EventStreamError",
    "EventStreamMessage",
    "HeaderValue",
    "encode_message",
]

PRELUDE = 12  # total length, headers length, prelude CRC
TRAILER = 4  # the message CRC
MIN_MESSAGE_BYTES = PRELUDE + TRAILER
MAX_HEADERS_BYTES = 128 * 1024
#: The largest message accepted: botocore's 24 MiB payload and 128 KiB of headers.
MAX_MESSAGE_BYTES = MIN_MESSAGE_BYTES + MAX_HEADERS_BYTES + 24 * 1024 * 1024

HeaderValue = bool | int | bytes | str | uuid.UUID

#: value type -> (struct format, size) for the fixed-size integer types
_FIXED = {2: (">b", 1), 3: (">h", 2), 4: (">i", 4), 5: (">q", 8), 8: (">q", 8)}


class EventStreamError(StreamError):
    """A message that cannot be framed: a CRC mismatch or an impossible length or header.

    ``offset`` is the byte offset, in the body, of the message the fault is in;
    ``frames`` are the messages the same ``feed()`` completed before it (valid, not
    returned)."""

    def __init__(self, reason: str, *, offset: int, frames: list[EventStreamMessage]) -> None:
        super().__init__(
            f"bad event-stream frame at byte {offset} of the body: {reason}",
            stage="stream",
            kind="bad_frame",
            offset=offset,
            reason=reason,
        )
        self.frames = frames
        #: Events decoded from ``frames`` (set by ``StreamDecoder``, as MalformedEvent's).
        self.events: list[StreamEvent] = []


@dataclass(frozen=True, slots=True, kw_only=True)
class EventStreamMessage:
    """One framed message."""

    headers: tuple[tuple[str, HeaderValue], ...]  # in wire order
    payload: bytes
    text: str  # the payload as UTF-8 (invalid sequences replaced by U+FFFD)
    t_ns: int  # stamp of the feed() whose bytes completed the message
    offset: int  # byte offset of its first byte in the body
    invalid_utf8: int = 0  # invalid UTF-8 sequences replaced in ``text``

    def header(self, name: str) -> HeaderValue | None:
        return next((v for n, v in self.headers if n == name), None)

    def string(self, name: str) -> str:
        """A header's value when it is a string, else ""."""
        value = self.header(name)
        return value if isinstance(value, str) else ""

    @property
    def message_type(self) -> str:
        """``event``, ``exception`` or ``error`` (``:message-type``)."""
        return self.string(":message-type")


class EventStreamDecoder:
    """Incremental AWS event-stream framer: ``feed(bytes, t_ns) -> [EventStreamMessage]``."""

    __slots__ = ("_buffer", "_bytes_seen", "_closed", "_max", "_need", "_start")

    def __init__(self, *, max_message: int = MAX_MESSAGE_BYTES) -> None:
        self._max = max_message
        self._buffer = bytearray()
        self._start = 0  # body offset of _buffer[0]
        self._need = PRELUDE  # bytes the message being assembled needs in all
        self._bytes_seen = 0
        self._closed = False

    @property
    def pending(self) -> bool:
        """Bytes are buffered that make no complete message (a partial message at EOF)."""
        return bool(self._buffer)

    @property
    def bytes_seen(self) -> int:
        return self._bytes_seen

    def feed(self, data: bytes, t_ns: int) -> list[EventStreamMessage]:
        if self._closed:
            return []
        self._bytes_seen += len(data)
        out: list[EventStreamMessage] = []
        view = memoryview(data)
        while view:
            # Only ever buffer what the message being assembled still lacks.
            take = min(len(view), self._need - len(self._buffer))
            self._buffer += view[:take]
            view = view[take:]
            if len(self._buffer) < self._need:
                break
            try:
                message = self._advance(t_ns)
            except _Bad as bad:
                self._closed = True
                self._buffer = bytearray()
                raise EventStreamError(bad.reason, offset=self._start, frames=out) from None
            if message is not None:
                out.append(message)
        return out

    def close(self, t_ns: int) -> list[EventStreamMessage]:
        """End of body: a partial message is dropped (``pending`` stays True)."""
        self._closed = True
        return []

    def _advance(self, t_ns: int) -> EventStreamMessage | None:
        buf = self._buffer
        if self._need == PRELUDE:
            total, headers_len, crc = struct.unpack_from(">III", buf)
            if zlib.crc32(buf[:8]) != crc:
                raise _Bad(
                    f"prelude CRC32 mismatch (carried 0x{crc:08x}, computed"
                    f" 0x{zlib.crc32(buf[:8]):08x})"
                )
            if total < MIN_MESSAGE_BYTES:
                raise _Bad(f"total length {total} is shorter than the 16-byte minimum")
            if total > self._max:
                raise _Bad(f"total length {total} exceeds the {self._max}-byte limit")
            if headers_len > min(total - MIN_MESSAGE_BYTES, MAX_HEADERS_BYTES):
                raise _Bad(f"headers length {headers_len} does not fit a {total}-byte message")
            self._need = total
            return None
        total = self._need
        (crc,) = struct.unpack_from(">I", buf, total - TRAILER)
        computed = zlib.crc32(buf[: total - TRAILER])
        if computed != crc:
            raise _Bad(f"message CRC32 mismatch (carried 0x{crc:08x}, computed 0x{computed:08x})")
        headers_len = struct.unpack_from(">I", buf, 4)[0]
        headers = _headers(bytes(buf[PRELUDE : PRELUDE + headers_len]))
        payload = bytes(buf[PRELUDE + headers_len : total - TRAILER])
        text, bad = decode_counting(payload)
        message = EventStreamMessage(
            headers=headers,
            payload=payload,
            text=text,
            t_ns=t_ns,
            offset=self._start,
            invalid_utf8=bad,
        )
        self._start += total
        self._buffer = bytearray()
        self._need = PRELUDE
        return message


class _Bad(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _headers(raw: bytes) -> tuple[tuple[str, HeaderValue], ...]:
    out: list[tuple[str, HeaderValue]] = []
    at = 0
    while at < len(raw):
        name_len = raw[at]
        name_raw = raw[at + 1 : at + 1 + name_len]
        at += 1 + name_len
        if len(name_raw) < name_len or at >= len(raw) or name_len == 0:
            raise _Bad("a header runs past the headers section")
        name = _utf8(name_raw, "header name")
        kind = raw[at]
        at += 1
        value: HeaderValue
        if kind in (0, 1):
            value = kind == 0
        elif kind in _FIXED:
            fmt, size = _FIXED[kind]
            if at + size > len(raw):
                raise _Bad(f"header {name!r} runs past the headers section")
            (value,) = struct.unpack_from(fmt, raw, at)
            at += size
        elif kind in (6, 7):
            if at + 2 > len(raw):
                raise _Bad(f"header {name!r} runs past the headers section")
            (size,) = struct.unpack_from(">H", raw, at)
            blob = raw[at + 2 : at + 2 + size]
            if len(blob) < size:
                raise _Bad(f"header {name!r} runs past the headers section")
            value = blob if kind == 6 else _utf8(blob, f"header {name!r}")
            at += 2 + size
        elif kind == 9:
            if at + 16 > len(raw):
                raise _Bad(f"header {name!r} runs past the headers section")
            value = uuid.UUID(bytes=raw[at : at + 16])
            at += 16
        else:
            raise _Bad(f"header {name!r} has value type {kind}, not one of 0-9")
        out.append((name, value))
    return tuple(out)


def _utf8(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Bad(f"{what} is not UTF-8") from exc


# -- encoding (the reference endpoint writes what this module reads) --------------------
def _header_bytes(name: str, value: HeaderValue) -> bytes:
    raw_name = name.encode()
    head = bytes([len(raw_name)]) + raw_name
    if isinstance(value, bool):
        return head + bytes([0 if value else 1])
    if isinstance(value, int):
        return head + b"\x05" + struct.pack(">q", value)
    if isinstance(value, str):
        blob = value.encode()
        return head + b"\x07" + struct.pack(">H", len(blob)) + blob
    if isinstance(value, uuid.UUID):
        return head + b"\x09" + value.bytes
    return head + b"\x06" + struct.pack(">H", len(value)) + value


def encode_message(headers: list[tuple[str, HeaderValue]], payload: bytes) -> bytes:
    """One message's bytes (strings as type 7, ints as int64, bytes as a byte array)."""
    raw_headers = b"".join(_header_bytes(n, v) for n, v in headers)
    total = MIN_MESSAGE_BYTES + len(raw_headers) + len(payload)
    prelude = struct.pack(">II", total, len(raw_headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + raw_headers + payload
    return body + struct.pack(">I", zlib.crc32(body))
