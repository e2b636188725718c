"""A scripted HTTP/2 peer (cleartext, prior knowledge) on loopback, built on the h2 library.

It records every request as it arrived (the header block h2 decoded, the body) and
answers with a script: a few SSE events, then a clean end, an RST_STREAM with a given
error code, or a GOAWAY. For what the reference endpoint will not do on purpose, and
to see the request exactly as an HTTP/2 server receives it.

A graceful GOAWAY (``goaway_after``: the stream goes on and ends after it) is written as
raw frame bytes: h2 closes its connection state machine when it sends a GOAWAY and then
refuses to send any frame on the streams the GOAWAY let finish (python-hyper/h2 #1181,
checked by hand: ``send_data`` after ``close_connection`` raises ProtocolError).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

import h2.config
import h2.connection
import h2.events
import hyperframe.frame

H2Ending = Literal["end", "rst", "goaway"]


@dataclass(slots=True)
class H2Received:
    """One request stream as the server decoded it."""

    headers: list[tuple[str, str]]
    body: bytes = b""
    reset_by_client: int | None = None  # the client's RST_STREAM error code, if it sent one

    def values(self, name: str) -> list[str]:
        return [v for n, v in self.headers if n == name]


@dataclass(slots=True)
class H2Server:
    port: int
    requests: list[H2Received] = field(default_factory=list)
    client_reset: threading.Event = field(default_factory=threading.Event)


def openai_events(texts: list[str]) -> list[bytes]:
    """OpenAI chat-completion chunks, one SSE event each, without the [DONE] marker."""
    import json

    return [
        b"data: "
        + json.dumps({"choices": [{"index": 0, "delta": {"content": t}}]}).encode()
        + b"\n\n"
        for t in texts
    ]


@contextlib.contextmanager
def raw_h2_server(
    events: list[bytes],
    *,
    ending: H2Ending = "end",
    code: int = 0,
    gap_s: float = 0.0,
    done: bytes = b"data: [DONE]\n\n",
    goaway_after: int | None = None,
    goaway_last: int | None = None,
) -> Iterator[H2Server]:
    """Answer each stream with ``events`` (``gap_s`` apart), then end it as ``ending`` says.

    ``end``: ``done`` and END_STREAM; ``rst``: RST_STREAM(``code``); ``goaway``: GOAWAY
    (``code``, last stream = this one) and the connection closed. ``goaway_after`` = K
    (with ``ending="end"``): a GOAWAY(NO_ERROR, last stream ``goaway_last``, default this
    one) after the HEADERS and K events, the rest of the stream sent after it, and the
    connection closed once the stream has ended: a graceful shutdown (RFC 9113 section
    6.8), as nginx drains on reload. ``goaway_last`` below the stream's id with
    ``goaway_after`` = -1: the GOAWAY comes instead of any response (the stream refused),
    and the connection is closed."""

    def raw_goaway(last: int) -> bytes:
        frame = hyperframe.frame.GoAwayFrame(0, last_stream_id=last, error_code=0)
        return bytes(frame.serialize())

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    server = H2Server(port=listener.getsockname()[1])
    stop = threading.Event()

    def respond(conn: h2.connection.H2Connection, sock: socket.socket, stream_id: int) -> bool:
        """Send the script on ``stream_id``; False when the connection is finished."""
        last = stream_id if goaway_last is None else goaway_last
        if goaway_after == -1:
            sock.sendall(conn.data_to_send() + raw_goaway(last))
            time.sleep(0.1)  # let the GOAWAY reach the client before the FIN
            return False
        conn.send_headers(stream_id, [(":status", "200"), ("content-type", "text/event-stream")])
        sock.sendall(conn.data_to_send())
        for index, event in enumerate(events):
            if index == goaway_after:
                sock.sendall(raw_goaway(last))
            if gap_s:
                time.sleep(gap_s)
            conn.send_data(stream_id, event)
            sock.sendall(conn.data_to_send())
        time.sleep(0.05)  # let the client read the events before the ending
        if ending == "end":
            conn.send_data(stream_id, done, end_stream=True)
        elif ending == "rst":
            conn.reset_stream(stream_id, error_code=code)
        else:
            conn.close_connection(error_code=code, last_stream_id=stream_id)
        sock.sendall(conn.data_to_send())
        return ending != "goaway" and goaway_after is None

    def serve_connection(sock: socket.socket) -> None:
        conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=False, header_encoding="latin-1")
        )
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        open_streams: dict[int, H2Received] = {}
        sock.settimeout(5)
        while not stop.is_set():
            try:
                data = sock.recv(65536)
            except OSError:
                return
            if not data:
                return
            for ev in conn.receive_data(data):
                if isinstance(ev, h2.events.RequestReceived):
                    received = H2Received(headers=[(str(n), str(v)) for n, v in ev.headers])
                    open_streams[ev.stream_id] = received
                    server.requests.append(received)
                elif isinstance(ev, h2.events.DataReceived):
                    open_streams[ev.stream_id].body += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamReset):
                    if ev.stream_id in open_streams:
                        open_streams[ev.stream_id].reset_by_client = int(ev.error_code or 0)
                    server.client_reset.set()
                elif isinstance(ev, h2.events.StreamEnded) and not respond(
                    conn, sock, ev.stream_id
                ):
                    time.sleep(0.1)  # let the GOAWAY reach the client before the FIN
                    return
            with contextlib.suppress(OSError):
                sock.sendall(conn.data_to_send())

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                sock, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            worker = threading.Thread(target=_closing, args=(serve_connection, sock), daemon=True)
            worker.start()

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        stop.set()
        thread.join(2)
        listener.close()


def _closing(serve: object, sock: socket.socket) -> None:
    try:
        serve(sock)  # type: ignore[operator]
    except Exception:  # a scripted peer: a client that left is not the test's failure
        pass
    finally:
        sock.close()
