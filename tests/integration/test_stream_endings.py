"""How a stream ends is judged from the stream, not from the transport (real sockets)."""

from __future__ import annotations

import time

import pytest

from promptpath.cli.commands import RunArgs, build_options
from promptpath.core.errors import StreamError
from promptpath.tracer.orchestrator import AFTER_END_GRACE_S, trace
from tests.helpers.rawserver import raw_server, sse_response

EVENTS = b"".join(b'data: {"choices":[{"delta":{"content":" t%d"}}]}\n\n' % i for i in range(5))
COMPLETE = EVENTS + b"data: [DONE]\n\n"


def options(port: int, timeout: float = 10.0):  # type: ignore[no-untyped-def]
    return build_options(
        RunArgs(target=f"http://127.0.0.1:{port}/v1/chat/completions", timeout=timeout),
        environ={},
    )


@pytest.mark.parametrize("ending", ["fin", "rst"])
async def test_marker_then_abrupt_close_is_a_complete_stream(ending: str) -> None:
    # No chunked terminator: the body ends by FIN or RST right after [DONE].
    with raw_server(sse_response(COMPLETE)[:-2], ending=ending) as port:  # type: ignore[arg-type]
        result = await trace(options(port))
    assert result.exc is None, result.exc
    assert result.timeline.stream_end == "marker"
    assert result.timeline.close_after_end is not None


async def test_marker_then_connection_left_open_ends_after_a_grace() -> None:
    with raw_server(sse_response(COMPLETE)[:-2], ending="hold") as port:
        start = time.perf_counter()
        result = await trace(options(port, timeout=8))
        elapsed = time.perf_counter() - start
    assert result.exc is None, result.exc
    assert result.timeline.stream_end == "marker"
    assert elapsed < AFTER_END_GRACE_S + 3
    assert "still open" in str(result.timeline.close_after_end)


async def test_error_event_then_connection_left_open_is_the_error_not_a_timeout() -> None:
    first_two = b"\n\n".join(EVENTS.split(b"\n\n")[:2]) + b"\n\n"
    body = first_two + b'data: {"error": {"message": "boom", "type": "server_error"}}\n\n'
    with raw_server(sse_response(body)[:-2], ending="hold") as port:
        result = await trace(options(port, timeout=8))
    assert isinstance(result.exc, StreamError) and result.exc.kind == "error_event"


@pytest.mark.parametrize(("ending", "words"), [("rst", "reset"), ("fin", "closed")])
async def test_cut_before_the_marker_is_truncated_and_says_how(ending: str, words: str) -> None:
    with raw_server(sse_response(EVENTS)[:-2], ending=ending) as port:  # type: ignore[arg-type]
        result = await trace(options(port))
    assert isinstance(result.exc, StreamError) and result.exc.kind == "truncated"
    assert result.timeline.stream_end == "truncated"
    assert result.timeline.close is not None and result.timeline.close.kind == ending
    assert words in result.exc.message, result.exc.message


@pytest.mark.parametrize(("ending", "words"), [("rst", "RST"), ("fin", "FIN")])
async def test_close_before_any_response_names_how(ending: str, words: str) -> None:
    with raw_server(b"", ending=ending) as port:  # type: ignore[arg-type]
        result = await trace(options(port))
    assert result.exc is not None
    assert words in result.exc.message, result.exc.message
    assert not result.exc.message.rstrip().endswith(":")


@pytest.mark.parametrize(
    ("encoding", "payload"),
    [("gzip", b"\x1f\x8b\x08\x00garbage-not-gzip"), ("deflate", b"not deflate at all")],
)
async def test_undecodable_compressed_stream_is_a_stream_error(
    encoding: str, payload: bytes
) -> None:
    response = sse_response(payload, extra_headers=b"content-encoding: %s\r\n" % encoding.encode())
    with raw_server(response, ending="fin") as port:
        result = await trace(options(port))
    assert isinstance(result.exc, StreamError) and result.exc.kind == "bad_encoding"


async def test_refused_says_refused() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        result = await trace(options(s.getsockname()[1], timeout=5))
    assert result.exc is not None and "refused" in result.exc.message.lower()


def test_a_key_echoed_in_an_error_body_is_never_shown() -> None:
    import json as _json

    from tests.helpers.cli import run_cli

    secret = "sk-echoed-SECRET-123456"
    body = _json.dumps({"error": {"message": f"Incorrect API key provided: {secret}"}}).encode()
    response = (
        b"HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(body), body)
    )
    with raw_server(response, ending="fin") as port:
        res = run_cli(
            "run",
            f"http://127.0.0.1:{port}/v1/chat/completions?key={secret}",
            "--json",
            "-v",
            "-H",
            f"X-Goog-Api-Key: {secret}",
            environ={"OPENAI_API_KEY": secret},
        )
    assert res.exit_code == 6
    assert secret not in res.stdout and secret not in res.stderr
    assert "[redacted]" in _json.loads(res.stdout)["error"]["message"]
