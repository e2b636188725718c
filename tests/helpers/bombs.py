"""Hostile event-stream servers on loopback that test the bounds (tests/integration/
test_hostile_bounds.py): a compression bomb, an endless stream, a trickle, lines as long
as the framer takes (tests/helpers/hostile.py holds the servers that echo secrets). Each
one answers every request with HTTP/1.1 200 and a chunked body that it keeps writing as
fast as the client reads, until the client leaves, the wire budget is spent or
``MAX_SERVE_S`` passes (a test that fails must not leave a writer running).

The bodies are built once per server from a repeated block, so the server costs little
CPU beside the client it is measuring: deflate after a full flush starts from an empty
window, so the same input block compresses to the same bytes every time and the gzip
stream is a header, a first block, and one block's bytes repeated.
"""

from __future__ import annotations

import contextlib
import socket
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from tests.helpers.threadserve import serve_each

#: The longest a hostile server writes to one connection, whatever the client does.
MAX_SERVE_S = 90.0

#: One OpenAI chat-completions token event (47 bytes on the wire, uncompressed).
TOKEN_EVENT = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'


def _event_block(event: bytes, size: int) -> bytes:
    return event * max(1, size // len(event))


@dataclass(frozen=True, slots=True, kw_only=True)
class Body:
    """What one hostile server sends: ``first`` once, then ``repeat`` until told to stop."""

    headers: bytes  # extra response header lines, each ending in CRLF
    first: bytes
    repeat: bytes
    wire_budget: int  # bytes of body to write at most (the chunked framing not counted)
    pause_s: float = 0.0  # between two writes (lets each write be a read of its own)
    status: bytes = b"200 OK"
    content_type: bytes = b"text/event-stream"

    def pieces(self) -> Iterator[bytes]:
        sent = 0
        piece = self.first
        while sent < self.wire_budget:
            yield piece
            sent += len(piece)
            piece = self.repeat


def gzip_bomb(*, wire_mb: float = 3.0) -> Body:
    """Gzip of endless small token events: ~330x (1 MiB of events is 3,117 bytes), so
    3 MB on the wire decode to ~1 GB, ~21 million events. No terminal marker."""
    block = _event_block(TOKEN_EVENT, 1 << 20)
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: a gzip header and trailer
    first = gz.compress(block) + gz.flush(zlib.Z_FULL_FLUSH)
    repeat = gz.compress(block) + gz.flush(zlib.Z_FULL_FLUSH)
    return Body(
        headers=b"content-encoding: gzip\r\n",
        first=first,
        repeat=repeat,
        wire_budget=int(wire_mb * 1e6),
    )


def endless_events(*, wire_mb: float = 2000.0) -> Body:
    """Uncompressed token events, as fast as the client reads them, never a terminal marker."""
    block = _event_block(TOKEN_EVENT, 64 << 10)
    return Body(headers=b"", first=block, repeat=block, wire_budget=int(wire_mb * 1e6))


def trickle_events(*, wire_mb: float = 2000.0) -> Body:
    """One token event per chunk, each its own write (TCP_NODELAY), 1 ms apart: slower
    than the client decodes (~16,000 events/s at load 7), so each write is a socket read
    of its own. 50 us apart the client fell behind under load and read them 64 KiB at a
    time (51 reads in 10 s)."""
    return Body(
        headers=b"",
        first=TOKEN_EVENT,
        repeat=TOKEN_EVENT,
        wire_budget=int(wire_mb * 1e6),
        pause_s=0.001,
    )


def long_lines_bomb(*, line_mb: float = 8.0, wire_mb: float = 6.0) -> Body:
    """Gzip of token events each carrying ``line_mb`` MB of text (under the framer's
    16 MiB line limit): every event is valid, and each one alone is large."""
    text = b"y" * int(line_mb * 1e6)
    event = b'data: {"choices":[{"delta":{"content":"' + text + b'"}}]}\n\n'
    gz = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = gz.compress(event) + gz.flush(zlib.Z_FULL_FLUSH)
    repeat = gz.compress(event) + gz.flush(zlib.Z_FULL_FLUSH)
    return Body(
        headers=b"content-encoding: gzip\r\n",
        first=first,
        repeat=repeat,
        wire_budget=int(wire_mb * 1e6),
    )


def nested_error(*, depth: int = 60_000) -> Body:
    """A 500 whose JSON error body nests ``depth`` arrays: deeper than json.loads can go."""
    return Body(
        headers=b"",
        first=b"[" * depth,
        repeat=b"",
        wire_budget=depth,
        status=b"500 Internal Server Error",
        content_type=b"application/json",
    )


def _read_request(conn: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        rest += chunk


def _serve_one(conn: socket.socket, body: Body) -> None:
    deadline = time.monotonic() + MAX_SERVE_S
    with conn, contextlib.suppress(OSError):
        conn.settimeout(10)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _read_request(conn)
        conn.sendall(
            b"HTTP/1.1 %s\r\ncontent-type: %s\r\n" % (body.status, body.content_type)
            + body.headers
            + b"transfer-encoding: chunked\r\n\r\n"
        )
        for piece in body.pieces():
            if time.monotonic() > deadline:
                break
            conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            if body.pause_s:
                time.sleep(body.pause_s)
        conn.sendall(b"0\r\n\r\n")


@contextlib.contextmanager
def hostile_server(body: Body) -> Iterator[int]:
    """Serve ``body`` to every connection on 127.0.0.1; yields the port."""
    with serve_each(lambda conn: _serve_one(conn, body), join_s=MAX_SERVE_S) as port:
        yield port
