"""An in-band error is never a success, in any dialect: the real CLI over real sockets.

Two sources of error streams: the recorded ones in tests/data/streams (one per way each
API reports a failure inside a 200: an OpenAI chunk with an ``error`` object, Responses'
``error`` and ``response.failed`` events, Anthropic's ``event: error``, Ollama's
``{"error": …}`` line, Gemini's ``google.rpc.Status``), served byte for byte by a raw
server; and the reference endpoint's ``error-after`` control in every dialect, over
HTTP/1.1 and HTTP/2. Each run must exit 7 with ``error.kind`` ``error_event``, keep the
tokens that arrived before the error, and print JSON the schema accepts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.rawserver import raw_server
from tests.helpers.refserver import RefServer, reference_server, sdk_http_client

ROOT = Path(__file__).parents[2]
SCHEMA = json.loads((ROOT / "promptpath/report/schema.json").read_text())
STREAMS = ROOT / "tests/data/streams"

#: file, provider, path, content events before the error, the error as the report names it
RECORDED = [
    ("openai_chat_error.sse", "openai", "/v1/chat/completions", 1, "server_error: The server"),
    ("responses_error.sse", "responses", "/v1/responses", 0, "rate_limit_exceeded: Rate limit"),
    ("responses_failed.sse", "responses", "/v1/responses", 0, "server_error: The model failed"),
    ("anthropic_overloaded.sse", "anthropic", "/v1/messages", 1, "overloaded_error: Overloaded"),
    ("ollama_error.ndjson", "ollama", "/api/chat", 0, 'model "llama9" not found'),
    (
        "gemini_error.sse",
        "gemini",
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        1,
        "UNAVAILABLE (503): The model is overloaded",
    ),
    # The same error as plain, pretty-printed JSON after the data: events (no data:
    # prefix): reported as truncated before (issue 30, item 6).
    (
        "gemini_error_plain.sse",
        "gemini",
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        1,
        'UNAVAILABLE (503): The model is overloaded. Please try again later. {"retry": "}"}',
    ),
]


def response_bytes(body: bytes, ndjson: bool) -> bytes:
    ctype = b"application/x-ndjson" if ndjson else b"text/event-stream"
    return b"HTTP/1.1 200 OK\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s" % (
        ctype,
        len(body),
        body,
    )


def run_json(*args: str) -> tuple[int, dict[str, Any]]:
    res = run_cli("run", *args, "--json", environ={})
    assert "Traceback" not in res.stdout + res.stderr, res.stderr
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    return res.exit_code, body


@pytest.mark.parametrize(
    ("name", "provider", "path", "tokens", "words"), RECORDED, ids=[r[0] for r in RECORDED]
)
@pytest.mark.parametrize("ending", ["fin", "hold"])
def test_a_recorded_in_band_error_exits_7_with_the_tokens_before_it(
    name: str, provider: str, path: str, tokens: int, words: str, ending: str
) -> None:
    raw = response_bytes((STREAMS / name).read_bytes(), name.endswith(".ndjson"))
    # "hold": the server keeps the connection open after the error, as a gateway may;
    # the error still ends the run (not a timeout).
    with raw_server(raw, ending=ending) as port:  # type: ignore[arg-type]
        code, body = run_json(f"http://127.0.0.1:{port}{path}", "--timeout", "10")
    assert code == body["exit_code"] == ExitCode.STREAM
    assert body["target"]["provider"] == provider
    assert (body["error"]["stage"], body["error"]["kind"]) == ("stream", "error_event")
    assert words in body["error"]["message"] and words in body["stream"]["error"]
    assert body["stream"]["end"] == "error"
    assert body["tokens"]["events"] == tokens


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(
        tls=True, tmp_path=tmp_path_factory.mktemp("inband"), extra_args=["--rate", "0"]
    ) as server:
        yield server


SERVE_PATHS = {
    "openai": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "ollama": "/api/chat",
    "gemini": "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
    "vertex": "/v1/projects/p/locations/l/publishers/google/models/m:streamGenerateContent",
    "azure": "/openai/deployments/d/chat/completions?api-version=2024-10-21",
    "cohere": "/v2/chat",
}


@pytest.mark.parametrize("http", ["1.1", "2"])
@pytest.mark.parametrize("provider", sorted(SERVE_PATHS))
def test_serves_error_after_is_an_error_in_every_dialect(
    ref: RefServer, provider: str, http: str
) -> None:
    code, body = run_json(
        f"https://localhost:{ref.port}{SERVE_PATHS[provider]}",
        "--cacert",
        str(ref.ca),
        "--http",
        http,
        "-H",
        "x-promptpath-error-after: 2",
    )
    assert code == ExitCode.STREAM, body["error"]
    assert body["target"]["provider"] == provider
    assert body["error"]["kind"] == "error_event" and body["ok"] is False
    assert body["tokens"]["events"] == 2
    assert body["http_version"] == ("HTTP/2" if http == "2" else "HTTP/1.1")


def test_the_openai_sdk_reads_serves_responses_error_as_typed_events(ref: RefServer) -> None:
    # openai-python raises APIError only on a top-level "error" member; Responses' in-band
    # errors reach the application as ResponseErrorEvent and ResponseFailedEvent, which
    # is why promptpath judges them itself.
    with sdk_http_client(openai, ref) as http:
        client = openai.OpenAI(
            base_url=ref.url + "/v1",
            api_key="k",
            http_client=http,
            max_retries=0,
            default_headers={"x-promptpath-error-after": "2"},
        )
        events = list(client.responses.create(model="m", input="hi", stream=True))
    types = [e.type for e in events]
    assert types[-2:] == ["error", "response.failed"]
    assert types.count("response.output_text.delta") == 2
    assert events[-1].response.status == "failed"  # type: ignore[union-attr]


@pytest.mark.parametrize("http", ["1.1", "2"])
@pytest.mark.parametrize("provider", sorted(SERVE_PATHS))
def test_a_stream_cut_before_its_end_is_truncated_in_every_dialect(
    ref: RefServer, provider: str, http: str
) -> None:
    # serve's truncate-after: over HTTP/1.1 the connection closes without the chunked
    # terminator, over HTTP/2 the stream ends cleanly; neither carries the dialect's end.
    code, body = run_json(
        f"https://localhost:{ref.port}{SERVE_PATHS[provider]}",
        "--cacert",
        str(ref.ca),
        "--http",
        http,
        "-H",
        "x-promptpath-truncate-after: 3",
    )
    assert code == ExitCode.STREAM, body["error"]
    assert body["target"]["provider"] == provider
    assert body["error"]["kind"] == "truncated" and body["ok"] is False
    assert body["stream"]["end"] == "truncated"
    assert body["tokens"]["events"] == 3


def test_google_genai_raises_the_plain_json_error_we_report() -> None:
    # The SDK is the proof of how the format reads: it yields the token before the error,
    # then raises ServerError with the error's code, status and message (google-genai
    # 3.6.1: lines outside data: are buffered until their braces balance).
    genai = pytest.importorskip("google.genai")
    from google.genai import errors, types

    raw = response_bytes((STREAMS / "gemini_error_plain.sse").read_bytes(), ndjson=False)
    with raw_server(raw, ending="fin") as port:
        client = genai.Client(
            api_key="k",
            http_options=types.HttpOptions(
                base_url=f"http://127.0.0.1:{port}",
                retry_options=types.HttpRetryOptions(attempts=1),
            ),
        )
        texts = []
        with pytest.raises(errors.ServerError) as caught:
            for chunk in client.models.generate_content_stream(model="m", contents="hi"):
                texts.append(chunk.text)
    assert texts == ["A flapping"]
    assert (caught.value.code, caught.value.status) == (503, "UNAVAILABLE")
    assert caught.value.message == 'The model is overloaded. Please try again later. {"retry": "}"}'
