"""A hostile WebSocket server on loopback: the upgrade done right, then frames on a script.

The frames are written by hand (RFC 6455 §5.2: a server's frames are unmasked), so a
script can send what a well-behaved library would refuse to: a message longer than any
client keeps, a ping after the client's Close, a permessage-deflate message that inflates
to a gigabyte. Each connection runs in a thread of its own and ends after ``MAX_SERVE_S``
whatever the client does, so a test that fails leaves no writer running.

Facts checked by hand (wsproto 1.3.2 as the client, Python's zlib): a raw deflate stream
(``wbits=-15``) of 1 MiB of ``a`` after a full flush is 1,051 bytes, and every further
MiB after a full flush the same 1,051 bytes again (a full flush empties the window), so
a gigabyte's message is a header, a first block and one block repeated ~1,000 times.
"""

from __future__ import annotations

import contextlib
import json
import socket
import struct
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from wsproto.utilities import generate_accept_token

from tests.helpers.threadserve import serve_each

#: The longest a hostile WebSocket server writes to one connection.
MAX_SERVE_S = 60.0

TEXT, BINARY, CLOSE, PING, PONG = 0x1, 0x2, 0x8, 0x9, 0xA


def frame(opcode: int, payload: bytes, *, fin: bool = True, rsv1: bool = False) -> bytes:
    """One unmasked frame, as a server sends it."""
    first = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", first, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", first, 126, n)
    else:
        head = struct.pack("!BBQ", first, 127, n)
    return head + payload


def frame_head(opcode: int, length: int, *, rsv1: bool = False) -> bytes:
    """The head of a final frame of ``length`` bytes whose payload is written after it."""
    return frame(opcode, b"", rsv1=rsv1)[:1] + struct.pack("!BQ", 127, length)


def event(obj: dict[str, object]) -> bytes:
    """A text frame carrying one JSON event."""
    return frame(TEXT, json.dumps(obj).encode())


def responses_events(tokens: int) -> bytes:
    """A whole Responses API answer over WebSocket: created, deltas, completed."""
    out = event({"type": "response.created", "response": {"id": "resp_1"}})
    for n in range(tokens):
        out += event({"type": "response.output_text.delta", "delta": f"t{n} "})
    usage = {"input_tokens": 3, "output_tokens": tokens}
    return out + event({"type": "response.completed", "response": {"usage": usage}})


@dataclass
class Peer:
    """The server's side of one upgraded connection, for a script to drive."""

    conn: socket.socket
    deflate: bool  # permessage-deflate was offered and accepted
    deadline: float
    pending: bytes = b""  # the 101, when the first frames go in its write
    _buffer: bytes = b""

    def send(self, data: bytes) -> None:
        self.conn.sendall(self.pending + data)
        self.pending = b""

    def expired(self) -> bool:
        return time.monotonic() > self.deadline

    def read_frame(self) -> tuple[int, bytes] | None:
        """The client's next frame (opcode, unmasked payload); None at EOF."""
        while True:
            parsed = _parse_client_frame(self._buffer)
            if parsed is not None:
                opcode, payload, used = parsed
                self._buffer = self._buffer[used:]
                return opcode, payload
            piece = self.conn.recv(65536)
            if not piece:
                return None
            self._buffer += piece

    def until_close(self) -> bool:
        """Read the client's frames until its Close; False if it left without one."""
        while (got := self.read_frame()) is not None:
            if got[0] == CLOSE:
                return True
        return False


def _parse_client_frame(data: bytes) -> tuple[int, bytes, int] | None:
    if len(data) < 2:
        return None
    opcode, n, at = data[0] & 0x0F, data[1] & 0x7F, 2
    if n == 126:
        if len(data) < 4:
            return None
        n, at = struct.unpack("!H", data[2:4])[0], 4
    elif n == 127:
        if len(data) < 10:
            return None
        n, at = struct.unpack("!Q", data[2:10])[0], 10
    masked = data[1] & 0x80
    key = data[at : at + 4] if masked else b""
    at += 4 if masked else 0
    if len(data) < at + n:
        return None
    payload = data[at : at + n]
    if masked:
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return opcode, payload, at + n


Script = Callable[[Peer], None]


def _upgrade(conn: socket.socket, *, accept_deflate: bool) -> tuple[bytes, bool] | None:
    """Read the upgrade request; the 101 and whether deflate is on (None: no request)."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            return None
        data += piece
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    headers = {}
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    token = generate_accept_token(headers["sec-websocket-key"].encode()).decode()
    deflate = accept_deflate and "permessage-deflate" in headers.get("sec-websocket-extensions", "")
    lines = [
        "HTTP/1.1 101 Switching Protocols",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Accept: {token}",
    ]
    if deflate:
        lines.append("Sec-WebSocket-Extensions: permessage-deflate")
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), deflate


@contextlib.contextmanager
def hostile_ws_server(
    script: Script, *, accept_deflate: bool = False, with_101: bool = False
) -> Iterator[int]:
    """Answer every upgrade on 127.0.0.1 with a 101, then run ``script``; yields the port.

    ``with_101``: the script's first frames go in the 101's own write (so in its read)."""

    def serve(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(10)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            answered = _upgrade(conn, accept_deflate=accept_deflate)
            if answered is None:
                return
            head, deflate = answered
            peer = Peer(conn, deflate, time.monotonic() + MAX_SERVE_S)
            if with_101:
                peer.pending = head
            else:
                conn.sendall(head)
            script(peer)
            peer.send(b"")

    with serve_each(serve, join_s=MAX_SERVE_S) as port:
        yield port


# -- scripts ------------------------------------------------------------------------------
def oversized_message(peer: Peer, *, mib: int = 20) -> None:
    """A token, then one text message of ``mib`` MiB (never a terminal marker)."""
    peer.send(event({"type": "response.created", "response": {"id": "resp_1"}}))
    peer.send(event({"type": "response.output_text.delta", "delta": "a"}))
    block = b"a" * (1 << 20)
    peer.send(frame_head(TEXT, mib * len(block)))
    for _ in range(mib):
        if peer.expired():
            return
        peer.send(block)
    peer.until_close()


def ping_across_close(peer: Peer) -> None:
    """Three tokens, then silence until the client's Close, answered by a ping (as if it
    had crossed the Close on the wire) and then the Close reply."""
    peer.send(event({"type": "response.created", "response": {"id": "resp_1"}}))
    for n in range(3):
        peer.send(event({"type": "response.output_text.delta", "delta": f"t{n} "}))
    if peer.until_close():
        peer.send(frame(PING, b"late") + frame(CLOSE, struct.pack("!H", 1000)))


def refused_frame(peer: Peer) -> None:
    """A text frame with RSV1 set and no extension agreed (a 1002 for the client), then
    whatever the client sends until its Close."""
    peer.send(frame(TEXT, b"{}", rsv1=True))
    peer.until_close()


def deflate_bomb(peer: Peer, *, gib: float = 1.0) -> None:
    """A token, then one compressed text message of ``gib`` GiB of ``a``."""
    peer.send(event({"type": "response.created", "response": {"id": "resp_1"}}))
    peer.send(event({"type": "response.output_text.delta", "delta": "a"}))
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = b"a" * (1 << 20)
    first = deflater.compress(block) + deflater.flush(zlib.Z_FULL_FLUSH)
    repeat = deflater.compress(block) + deflater.flush(zlib.Z_FULL_FLUSH)
    count = int(gib * 1024)
    tail = deflater.flush(zlib.Z_SYNC_FLUSH)[:-4]  # RFC 7692 §7.2.1: the 4 bytes dropped
    length = len(first) + (count - 1) * len(repeat) + len(tail)
    peer.send(frame_head(TEXT, length, rsv1=True) + first)
    for _ in range(count - 1):
        if peer.expired():
            return
        peer.send(repeat)
    peer.send(tail)
    peer.until_close()


__all__ = [
    "Peer",
    "deflate_bomb",
    "frame",
    "hostile_ws_server",
    "oversized_message",
    "ping_across_close",
    "refused_frame",
    "responses_events",
]
