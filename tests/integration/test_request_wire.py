"""The request promptpath puts on the wire is well-formed whatever -H says, on HTTP/1.1,
HTTP/2 and HTTP/3: asserted on what a real server received, over loopback sockets.

What curl 7.88.1 does with the same flags (checked by hand on loopback, 2026-12-01,
``curl URL -d hello`` against a socket that prints what it gets, and with
``--http2-prior-knowledge -v``):
- ``-H 'Host: other.example'``: HTTP/1.1 ``Host: other.example`` (its own dropped); HTTP/2
  ``:authority: other.example``. promptpath does the same on all three versions.
- ``-H 'Content-Length: 3'`` with a 5-byte body: sends ``Content-Length: 3`` then all 5
  bytes on HTTP/1.1 (2 bytes left over for the next request), ``content-length: 3`` on
  HTTP/2. promptpath refuses it (exit 2).
- ``-H 'Transfer-Encoding: chunked'``: HTTP/1.1 switches to chunked and sends no
  Content-Length; HTTP/2 drops the header and sends no content-length. promptpath refuses.
- ``-H 'Connection: close'``: kept on HTTP/1.1, dropped on HTTP/2. promptpath refuses.
"""

from __future__ import annotations

import json
import os

import pytest

from promptpath.net.quic import h3_headers
from promptpath.net.transport import ConnectSpec, WireRequest
from tests.helpers.cli import run_cli
from tests.helpers.rawh2 import openai_events, raw_h2_server
from tests.helpers.rawserver import raw_server, sse_response

COMPLETE = b"".join(openai_events([" a", " b"])) + b"data: [DONE]\n\n"


def _h1_head(raw: bytes) -> tuple[list[tuple[str, str]], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")[1:]
    fields = [(n.strip().lower(), v.strip()) for n, _, v in (ln.partition(":") for ln in lines)]
    return fields, body


def _values(fields: list[tuple[str, str]], name: str) -> list[str]:
    return [v for n, v in fields if n == name]


@pytest.mark.parametrize("host", [None, "vhost.example:8443"])
def test_http1_request_has_one_host_and_one_length_and_no_transfer_encoding(
    host: str | None,
) -> None:
    received: list[bytes] = []
    with raw_server(sse_response(COMPLETE), ending="fin", received=received) as port:
        extra = ["-H", f"Host: {host}"] if host else []
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        result = run_cli("run", "--json", "--http", "1.1", url, *extra)
    assert result.exit_code == 0, result.stderr
    fields, body = _h1_head(received[0])
    assert _values(fields, "host") == [host or f"127.0.0.1:{port}"]
    assert _values(fields, "content-length") == [str(len(body))]
    assert _values(fields, "transfer-encoding") == []
    json.loads(body)  # the whole body, and nothing after it


@pytest.mark.parametrize("host", [None, "vhost.example:8443"])
def test_http2_request_names_the_authority_once_and_frames_the_body_once(
    host: str | None,
) -> None:
    with raw_h2_server(openai_events([" a"])) as server:
        extra = ["-H", f"Host: {host}"] if host else []
        url = f"http://127.0.0.1:{server.port}/v1/chat/completions"
        result = run_cli("run", "--json", "--http", "2", url, *extra)
    assert result.exit_code == 0, result.stderr
    (request,) = server.requests
    assert request.values(":authority") == [host or f"127.0.0.1:{server.port}"]
    assert request.values("host") == []  # RFC 9113 8.3.1: :authority only
    assert request.values("content-length") == [str(len(request.body))]
    assert request.values("transfer-encoding") == [] and request.values("connection") == []


def test_http3_headers_carry_the_host_as_authority_and_one_content_length() -> None:
    spec = ConnectSpec(host="127.0.0.1", port=8443, scheme="https", addresses=())
    body = b'{"x": 1}'
    for headers, authority in (
        ((("accept", "text/event-stream"),), b"127.0.0.1:8443"),
        ((("Host", "vhost.example"), ("accept", "text/event-stream")), b"vhost.example"),
    ):
        # Framing headers a caller slipped in are not copied: the transport states them.
        sneaky = (*headers, ("content-length", "3"), ("transfer-encoding", "chunked"))
        fields = h3_headers(WireRequest(method="POST", path="/v1", headers=sneaky, body=body), spec)
        names = [n for n, _ in fields]
        assert names[:4] == [b":method", b":scheme", b":authority", b":path"]
        assert dict(fields)[b":authority"] == authority
        assert [v for n, v in fields if n == b"content-length"] == [b"8"]
        assert b"host" not in names and b"transfer-encoding" not in names


@pytest.mark.parametrize(
    "header",
    [
        "Transfer-Encoding: chunked",
        "Content-Length: 3",
        "Connection: close",
        "Keep-Alive: timeout=5",
        "Upgrade: h2c",
        "TE: gzip",
    ],
)
def test_framing_and_connection_headers_are_refused_before_anything_is_sent(header: str) -> None:
    received: list[bytes] = []
    with raw_server(sse_response(COMPLETE), ending="fin", received=received) as port:
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        result = run_cli("run", "--json", url, "-H", header)
    assert result.exit_code == 2
    error = json.loads(result.stdout)["error"]
    assert error["stage"] == "config" and error["kind"] == "bad_option"
    assert header.split(":")[0] in error["message"] and "refused" in error["message"]
    assert received == []  # refused before any connection


def test_two_host_headers_are_refused() -> None:
    result = run_cli(
        "run", "--json", "http://127.0.0.1:9/v1/chat/completions", "-H", "Host: a", "-H", "Host: b"
    )
    assert result.exit_code == 2
    assert "Host" in json.loads(result.stdout)["error"]["message"]


@pytest.mark.parametrize("flag", ["-m", "-p", "-H"])
def test_an_argument_that_is_not_utf8_is_a_usage_error_and_nothing_is_sent(flag: str) -> None:
    received: list[bytes] = []
    bad = os.fsdecode(b"\xc3(") if flag != "-H" else "X-Note: " + os.fsdecode(b"\xff")
    with raw_server(sse_response(COMPLETE), ending="fin", received=received) as port:
        url = f"http://127.0.0.1:{port}/v1/chat/completions"
        result = run_cli("run", "--json", url, flag, bad)
    assert result.exit_code == 2, result.stderr
    error = json.loads(result.stdout)["error"]
    assert error["kind"] == "bad_option" and flag in error["message"]
    assert "UTF-8" in error["message"]
    assert received == []
    # The message carries no lone surrogate: it encodes as strict UTF-8.
    (result.stdout + result.stderr).encode("utf-8")
