"""A scripted HTTP/1.1 peer on loopback: sends exact bytes, then ends the way a test says.

For the ways real servers and middleboxes misbehave that a well-behaved ASGI server will
not do on purpose: RST after the last event, no chunked terminator, a connection left open.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Literal

Ending = Literal["fin", "rst", "hold"]


def sse_response(body: bytes, *, chunked: bool = True, extra_headers: bytes = b"") -> bytes:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n" + extra_headers
    if not chunked:
        return head + b"connection: close\r\n\r\n" + body
    return head + b"transfer-encoding: chunked\r\n\r\n" + b"%x\r\n%s\r\n" % (len(body), body)


def _complete(data: bytes) -> bool:
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value.strip())
    return True


@contextlib.contextmanager
def raw_server(
    response: bytes, *, ending: Ending, received: list[bytes] | None = None
) -> Iterator[int]:
    """Serve ``response`` to each connection, then FIN, RST, or hold the socket open.

    ``received``: each connection's request bytes are appended to it, as they arrived."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    stop = threading.Event()
    held: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            conn.settimeout(5)
            data = b""
            with contextlib.suppress(OSError):
                # The whole request, body included: closing with unread data makes the
                # kernel send RST instead of FIN, and the test would not get the ending it set.
                while not _complete(data):
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            if received is not None:
                received.append(data)
            with contextlib.suppress(OSError):
                conn.sendall(response)
            if ending == "rst":
                # Let the client read first: Linux drops unread data when a RST arrives.
                stop.wait(0.3)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                conn.close()
            elif ending == "fin":
                conn.close()
            else:
                held.append(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        stop.set()
        thread.join(2)
        listener.close()
        for conn in held:
            conn.close()
