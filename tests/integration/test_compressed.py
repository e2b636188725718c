"""A hop that gzips the event stream anyway: decoded, reported, still timed."""

from __future__ import annotations

import asyncio
import socket
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from promptpath.cli.commands import RunArgs, build_options
from promptpath.core.analysis import compute
from promptpath.tracer.orchestrator import trace


async def gzip_sse_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Ignores Accept-Encoding: identity, like a misconfigured compressing proxy."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream"), (b"content-encoding", b"gzip")],
        }
    )
    gz = zlib.compressobj(wbits=31)
    for i in range(5):
        event = f'data: {{"choices":[{{"delta":{{"content":" t{i}"}}}}]}}\n\n'.encode()
        chunk = gz.compress(event) + gz.flush(zlib.Z_SYNC_FLUSH)
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await asyncio.sleep(0.01)
    tail = gz.compress(b"data: [DONE]\n\n") + gz.flush()
    await send({"type": "http.response.body", "body": tail, "more_body": False})


@pytest.fixture
def gzip_server() -> Iterator[int]:
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    stop = threading.Event()

    def run() -> None:
        async def main() -> None:
            async def trigger() -> None:
                while not stop.is_set():
                    await asyncio.sleep(0.05)

            await serve(gzip_sse_app, config, shutdown_trigger=trigger)  # type: ignore[arg-type]

        asyncio.run(main())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            threading.Event().wait(0.05)
    yield port
    stop.set()
    thread.join(5)


async def test_gzip_event_stream_is_decoded_and_reported(gzip_server: int) -> None:
    opts = build_options(
        RunArgs(target=f"http://127.0.0.1:{gzip_server}/v1/chat/completions"), environ={}
    )
    result = await trace(opts)
    assert result.exc is None, result.exc
    assert result.timeline.compressed == "gzip"
    m = compute(result.timeline)
    assert m.tokens.events == 5 and result.timeline.stream_end == "marker"
    from promptpath.core.analysis import headline

    assert "compressed with gzip" in headline(result.timeline, m)
