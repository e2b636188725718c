"""A scripted HTTP/2 peer (cleartext, prior knowledge) on loopback, built on the h2 library.

It records every request as it arrived (the header block h2 decoded, the body) and
answers with a script: a few SSE events, then a clean end, an RST_STREAM with a given
error code, or a GOAWAY. For what the reference endpoint will not do on purpose, and
to see the request exactly as an HTTP/2 server receives it.
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
) -> Iterator[H2Server]:
    """Answer each stream with ``events`` (``gap_s`` apart), then end it as ``ending`` says.

    ``end``: ``done`` and END_STREAM; ``rst``: RST_STREAM(``code``); ``goaway``: GOAWAY
    (``code``, last stream = this one) and the connection closed."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    server = H2Server(port=listener.getsockname()[1])
    stop = threading.Event()

    def respond(conn: h2.connection.H2Connection, sock: socket.socket, stream_id: int) -> bool:
        """Send the script on ``stream_id``; False when the connection is finished."""
        conn.send_headers(stream_id, [(":status", "200"), ("content-type", "text/event-stream")])
        sock.sendall(conn.data_to_send())
        for event in events:
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
        return ending != "goaway"

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
