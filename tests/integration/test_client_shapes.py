"""--as over real sockets: what the server receives, the HTTP version, and a stream
compressed only for clients that accept gzip (as nginx `gzip` does), decoded and reported.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promptpath.cli.commands import RunArgs, build_options
from promptpath.tracer.orchestrator import trace
from tests.helpers.asgiserver import serve_asgi
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer

CHAT = "/v1/chat/completions"
SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
TOKENS = 5


class GzipWhenAccepted:
    """Gzips the event stream only for a request that accepts gzip; keeps what it saw."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.seen.append(headers)
        while (await receive()).get("more_body"):
            pass
        codings = {c.split(";")[0].strip() for c in headers.get("accept-encoding", "").split(",")}
        gz = zlib.compressobj(wbits=31) if "gzip" in codings else None
        response = [(b"content-type", b"text/event-stream")]
        if gz is not None:
            response.append((b"content-encoding", b"gzip"))
        await send({"type": "http.response.start", "status": 200, "headers": response})
        chunk = 'data: {"choices":[{"delta":{"content":" t%d"}}]}\n\n'
        events = [chunk % i for i in range(TOKENS)]
        for i, event in enumerate([*events, "data: [DONE]\n\n"]):
            data = event.encode()
            if gz is not None:
                last = i == len(events)
                data = gz.compress(data) + gz.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)
            await send({"type": "http.response.body", "body": data, "more_body": True})
            await asyncio.sleep(0.005)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


@pytest.fixture
def gzip_app() -> Iterator[tuple[GzipWhenAccepted, int]]:
    app = GzipWhenAccepted()
    with serve_asgi(app) as port:
        yield app, port


@pytest.mark.parametrize(
    ("client", "user_agent", "accept_encoding", "compressed"),
    [
        (None, "OpenAI/Python 3.57.0 promptpath/0.1", "gzip, deflate", "gzip"),
        ("identity", "promptpath/0.1", "identity", None),
        ("curl", "curl/7.88.1 promptpath/0.1", None, None),
    ],
    ids=["default", "identity", "curl"],
)
async def test_the_server_gets_the_shapes_headers_and_the_stream_is_decoded(
    gzip_app: tuple[GzipWhenAccepted, int],
    client: str | None,
    user_agent: str,
    accept_encoding: str | None,
    compressed: str | None,
) -> None:
    app, port = gzip_app
    opts = build_options(RunArgs(target=f"http://127.0.0.1:{port}{CHAT}", client=client), {})
    result = await trace(opts)
    assert result.exc is None, result.exc
    (seen,) = app.seen
    assert seen["user-agent"] == user_agent
    assert seen.get("accept-encoding") == accept_encoding
    assert result.timeline.compressed == compressed
    assert [e.text for e in result.timeline.events if e.kind == "content"] == [
        f" t{i}" for i in range(TOKENS)
    ]


@pytest.mark.parametrize(
    ("client", "alpn_offered", "version"),
    [
        ("openai-python", ("http/1.1",), "HTTP/1.1"),
        ("anthropic-python", ("http/1.1",), "HTTP/1.1"),
        ("curl", ("http/1.1", "h2"), "HTTP/2"),
        ("browser", ("http/1.1", "h2"), "HTTP/2"),
    ],
)
async def test_each_shape_offers_its_clients_http_versions_by_alpn(
    refserver_tls: RefServer, client: str, alpn_offered: tuple[str, ...], version: str
) -> None:
    opts = build_options(
        RunArgs(target=refserver_tls.url + CHAT, cacert=refserver_tls.ca, client=client), {}
    )
    result = await trace(opts)
    tl = result.timeline
    assert result.exc is None, result.exc
    assert tl.tls is not None and tl.tls.alpn_offered == alpn_offered
    assert tl.http_version == version


def test_json_names_the_shape_and_an_unknown_one_is_a_usage_error(
    gzip_app: tuple[GzipWhenAccepted, int],
) -> None:
    _, port = gzip_app
    url = f"http://127.0.0.1:{port}{CHAT}"
    res = run_cli("run", url, "--as", "browser", "--json")
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    assert res.exit_code == 0, res.stderr
    assert body["client"]["as"] == "browser" and body["client"]["not_offered"] == ["br", "zstd"]
    assert body["stream"]["compressed"] == "gzip"
    assert "as browser" in res.stderr.splitlines()[0]
    bad = run_cli("run", url, "--as", "requests", "--json")
    assert bad.exit_code == 2 and json.loads(bad.stdout)["error"]["kind"] == "bad_option"
    assert bad.stderr.strip() == (
        "promptpath: --as must be one of openai-python, anthropic-python, ollama-python,"
        " google-genai, boto3, cohere, curl, browser, identity, got 'requests'"
    )
