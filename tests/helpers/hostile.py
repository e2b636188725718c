"""Hostile peers on loopback: an origin and a CONNECT proxy that echo what they were sent.

A hop promptpath is pointed at may copy any request header anywhere it likes: into its
own response headers (``X-Request-Id``, ``Via``, ``Server``), into the status text, into
an error body, into a stream's error event. It may also send control characters, bytes
that decode to C1 controls, and JSON with lone surrogates. Both peers here are real
sockets on 127.0.0.1 (a thread per connection); what they answer is a function of the
request they read, so every case of the hostile-output test is one small function.

Facts checked by hand (h11 0.16, httpcore 1.0.9, promptpath's own client):
- h11 takes ESC, BEL, DEL and obs-text bytes 0x80-0xFF in a header value (the last arrive
  as latin-1: 0x9b is U+009B, the one-byte CSI an 8-bit terminal obeys); rich drops the BEL
  when it prints. A NUL or a CR in a header value is refused as a protocol error whose
  message quotes the whole line: ``illegal header line: bytearray(b'x-request-id: a\\x00b')``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from promptpath.core.redaction import PIECE


@dataclass(frozen=True, slots=True)
class Request:
    """What the peer read: the request line and headers (name as sent), and the body."""

    line: str
    headers: list[tuple[str, str]]
    body: bytes = b""

    def header(self, name: str) -> str:
        return next((v for k, v in self.headers if k.lower() == name.lower()), "")

    def every_header(self) -> str:
        """Every request header as ``name: value`` lines, in one string."""
        return "\n".join(f"{k}: {v}" for k, v in self.headers)


#: The answer to a request: its bytes, or pieces written ``gap_s`` apart.
Respond = Callable[[Request], bytes | list[bytes]]


def _read_request(conn: socket.socket) -> Request | None:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = conn.recv(65536)
        if not piece:
            return None
        data += piece
        if len(data) > 1 << 20:
            return None
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers.append((name.strip(), value.strip()))
    request = Request(lines[0], headers)
    length = int(request.header("content-length") or 0)
    while len(body) < length:
        piece = conn.recv(65536)
        if not piece:
            break
        body += piece
    return Request(lines[0], headers, body)


def forbidden(secret: str) -> list[str]:
    """The secret, its base64 and every PIECE-character run of either: none may show."""
    encoded = base64.b64encode(secret.encode()).decode()
    out = {secret, encoded}
    for text in (secret, encoded):
        out.update(text[i : i + PIECE] for i in range(len(text) - PIECE + 1))
    return sorted(out)


def said_as_credentials(request: Request) -> str:
    """The request as a hop that explains a refusal quotes it: its request line, then
    every header as ``name: value`` on one line, so that each credential sits where the
    text itself says a credential follows (``Bearer …``, ``x-api-key: …``, ``api_key=…``)."""
    return f"{request.line}; " + "; ".join(f"{k}: {v}" for k, v in request.headers)


@dataclass
class Recorded:
    """What a recording peer was sent: each request, in order."""

    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bodies(self) -> str:
        with self.lock:
            return "\n".join(r.body.decode("utf-8", "replace") for r in self.requests)


@contextlib.contextmanager
def recording_origin(respond: Respond) -> Iterator[tuple[int, Recorded]]:
    """``hostile_origin`` that also keeps every request it read (a Pushgateway's PUT)."""
    recorded = Recorded()

    def keep(request: Request) -> bytes:
        with recorded.lock:
            recorded.requests.append(request)
        return respond(request)

    with hostile_origin(keep) as port:
        yield port, recorded


def response(
    status: str, headers: list[tuple[str, str]], body: bytes, *, close: bool = True
) -> bytes:
    """One HTTP/1.1 response; header values are written as latin-1 (obs-text kept)."""
    head = [f"HTTP/1.1 {status}", *(f"{k}: {v}" for k, v in headers)]
    head.append(f"content-length: {len(body)}")
    if close:
        head.append("connection: close")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def sse(*events: dict[str, object] | str) -> bytes:
    """An SSE body: each dict as a ``data:`` event, each str as raw text, then [DONE]."""
    out = []
    for event in events:
        out.append(event if isinstance(event, str) else f"data: {json.dumps(event)}\n\n")
    out.append("data: [DONE]\n\n")
    return "".join(out).encode()


def chunk(text: str) -> dict[str, object]:
    """An OpenAI chat-completions chunk carrying ``text``."""
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}


@dataclass
class _Listener:
    handle: Callable[[socket.socket], None]
    sock: socket.socket = field(default_factory=socket.socket)
    stop: threading.Event = field(default_factory=threading.Event)

    def serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _addr = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            with contextlib.suppress(OSError):
                self.handle(conn)


@contextlib.contextmanager
def _listening(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    listener = _Listener(handle)
    listener.sock.bind(("127.0.0.1", 0))
    listener.sock.listen(16)
    listener.sock.settimeout(0.2)
    thread = threading.Thread(target=listener.serve, daemon=True)
    thread.start()
    try:
        yield listener.sock.getsockname()[1]
    finally:
        listener.stop.set()
        thread.join(5)
        listener.sock.close()


def paced(status: str, headers: list[tuple[str, str]], events: list[bytes]) -> list[bytes]:
    """One HTTP/1.1 response in pieces: the head with the first event, then one event
    each (for ``hostile_origin(..., gap_s=)``: events that arrive apart in time)."""
    whole = response(status, headers, b"".join(events))
    head = len(whole) - sum(map(len, events))
    cuts = [head + sum(map(len, events[: n + 1])) for n in range(len(events))]
    return [whole[a:b] for a, b in zip([0, *cuts[:-1]], cuts, strict=True)]


@contextlib.contextmanager
def hostile_origin(respond: Respond, *, gap_s: float = 0.0) -> Iterator[int]:
    """An HTTP/1.1 origin on 127.0.0.1 answering each request with ``respond(request)``
    (a list of pieces: each written ``gap_s`` after the one before)."""

    def handle(conn: socket.socket) -> None:
        request = _read_request(conn)
        if request is None:
            return
        answer = respond(request)
        for n, piece in enumerate([answer] if isinstance(answer, bytes) else answer):
            if n and gap_s:
                time.sleep(gap_s)
            conn.sendall(piece)

    with _listening(handle) as port:
        yield port


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def hostile_proxy(answer: Respond) -> Iterator[int]:
    """A CONNECT proxy on 127.0.0.1: ``answer(request)`` is its reply to CONNECT; a 2xx
    reply opens the tunnel to the requested 127.0.0.1 port (nothing off loopback)."""

    def handle(conn: socket.socket) -> None:
        request = _read_request(conn)
        if request is None:
            return
        reply = answer(request)
        conn.sendall(reply)
        if not reply.startswith(b"HTTP/1.1 2"):
            return
        method, target, _version = request.line.split(" ", 2)
        host, _, port = target.rpartition(":")
        assert method == "CONNECT" and host in ("127.0.0.1", "localhost"), request.line
        with socket.create_connection(("127.0.0.1", int(port)), timeout=10) as upstream:
            back = threading.Thread(target=_pipe, args=(upstream, conn), daemon=True)
            back.start()
            _pipe(conn, upstream)
            back.join(10)

    with _listening(handle) as port:
        yield port


__all__ = [
    "Recorded",
    "Request",
    "chunk",
    "forbidden",
    "hostile_origin",
    "hostile_proxy",
    "paced",
    "recording_origin",
    "response",
    "said_as_credentials",
    "sse",
]
