"""Every answer the reference endpoint gives before it has used the request body, over
HTTP/1.1, HTTP/2 and HTTP/3: the right status, and nothing but access lines in its log.

Each request sends its headers, pauses, then sends its body, the order in which a
client's body can arrive after an early answer. Observed before the fix (hypercorn
0.18, curl 7.88 ``--http2 -H 'x-promptpath-rate: abc' -d ...``): the 400 reached the
client, then hypercorn logged "Unhandled exception in client_connected_cb ...
ExceptionGroup ... KeyError: 1" from ``h2.py`` handling the DATA frame for a stream it
had already removed. This test's split request reproduced it on h2, on h1 (an
SSLError: data after close_notify) and made the h3 requests fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import pytest

from promptpath.server.streaming import MAX_BODY
from tests.helpers.refserver import RefServer, h3_request, reference_server

KEY = "sk-early-errors-test"
CHAT = "/v1/chat/completions"
GOOD = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
#: Long enough that, without the fix, the early answer is out before the body is sent.
BODY_AFTER_S = 0.3
CRASH_WORDS = ("Traceback", "Unhandled exception", "ExceptionGroup")


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    method: str
    path: str
    body: bytes
    status: int
    headers: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {KEY}"),)


CASES = [
    Case("unknown path", "POST", "/v1/nowhere", GOOD, 404),
    Case("wrong method", "PUT", CHAT, GOOD, 405),
    Case("no key", "POST", CHAT, GOOD, 401, headers=()),
    Case(
        "bad control",
        "POST",
        CHAT,
        GOOD,
        400,
        headers=(("authorization", f"Bearer {KEY}"), ("x-promptpath-rate", "abc")),
    ),
    Case("body not JSON", "POST", CHAT, b"{not json", 400),
    Case("body too large", "POST", CHAT, b"x" * (MAX_BODY + 1), 413),
    Case(
        "status control",
        "POST",
        CHAT,
        GOOD,
        503,
        headers=(("authorization", f"Bearer {KEY}"), ("x-promptpath-status", "503")),
    ),
    Case("healthz with a body", "POST", "/healthz", GOOD, 200),
    Case("stats with a body", "POST", "/stats", GOOD, 200),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(
        http3=True,
        extra_args=["--api-key-env", "PP_EARLY_KEY"],
        env={"PP_EARLY_KEY": KEY},
        tmp_path=tmp_path_factory.mktemp("early-errors"),
    ) as running:
        yield running


def _tls(server: RefServer, alpn: str) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=server.ca)
    context.set_alpn_protocols([alpn])
    raw = socket.create_connection((server.host, server.port), timeout=10)
    return context.wrap_socket(raw, server_hostname="localhost")


def _h1(server: RefServer, case: Case) -> int:
    head = [f"{case.method} {case.path} HTTP/1.1", "host: localhost", "connection: close"]
    head += [f"content-length: {len(case.body)}", *(f"{k}: {v}" for k, v in case.headers)]
    with _tls(server, "http/1.1") as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        time.sleep(BODY_AFTER_S)
        with contextlib.suppress(OSError):  # a server that answered early may have closed
            sock.sendall(case.body)
        reply = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                reply += chunk
    return int(reply.split(b" ", 2)[1])


def _h2(server: RefServer, case: Case) -> int:
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    status = 0
    ended = False

    with _tls(server, "h2") as sock:

        def pump() -> bool:
            nonlocal status, ended
            data = sock.recv(65536)
            if not data:
                return False
            for event in conn.receive_data(data):
                if isinstance(event, h2.events.ResponseReceived):
                    status = int(dict(event.headers)[b":status"])
                elif isinstance(event, h2.events.StreamEnded | h2.events.StreamReset):
                    ended = True
            sock.sendall(conn.data_to_send())
            return True

        conn.initiate_connection()
        request = [
            (":method", case.method),
            (":scheme", "https"),
            (":authority", f"localhost:{server.port}"),
            (":path", case.path),
            *case.headers,
        ]
        conn.send_headers(1, request, end_stream=not case.body)
        sock.sendall(conn.data_to_send())
        time.sleep(BODY_AFTER_S)
        body = case.body
        with contextlib.suppress(OSError, h2.exceptions.StreamClosedError):
            while body:
                window = min(conn.local_flow_control_window(1), conn.max_outbound_frame_size)
                if window <= 0:
                    if not pump():
                        break
                    continue
                conn.send_data(1, body[:window], end_stream=len(body) <= window)
                body = body[window:]
                sock.sendall(conn.data_to_send())
            # A PING answered means the server has handled every frame sent before it.
            conn.ping(b"barrier!")
            sock.sendall(conn.data_to_send())
            while not ended and pump():
                pass
    return status


def _h3(server: RefServer, case: Case) -> int:
    response = asyncio.run(
        h3_request(
            server.port,
            case.path,
            body=case.body,
            method=case.method,
            headers=case.headers,
            ca=server.ca,
            body_after_s=BODY_AFTER_S,
            timeout=30,
        )
    )
    return response.status


CLIENTS = {"h1": _h1, "h2": _h2, "h3": _h3}


def _log_size(path: Path) -> int:
    return path.stat().st_size


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("version", list(CLIENTS))
def test_early_answer_has_its_status_and_leaves_a_clean_log(
    server: RefServer, version: str, case: Case
) -> None:
    start = _log_size(server.stderr)
    assert CLIENTS[version](server, case) == case.status
    # A fresh round trip lets the server's loop run the callbacks that would log a crash
    # of the connection above before the log is read.
    assert _h1(server, Case("barrier", "GET", "/healthz", b"", 200)) == 200
    with server.stderr.open("rb") as log:
        log.seek(start)
        written = log.read().decode(errors="replace")
    assert not [word for word in CRASH_WORDS if word in written], written
