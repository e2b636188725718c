"""promptpath against the reference endpoint in the Gemini, Vertex, Azure OpenAI and
Cohere v2 dialects, over HTTP/1.1 and HTTP/2: stages, tokens, usage, in-band errors,
truncation.

The server demands the key, so a 200 proves the request carried it in the dialect's
header (x-goog-api-key, Authorization: Bearer, api-key).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
KEY = "k-test-DO-NOT-LEAK-4c1e"

#: provider -> (path, the environment that carries the key, extra run arguments)
DIALECTS: dict[str, tuple[str, dict[str, str], list[str]]] = {
    "gemini": (
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        {"GEMINI_API_KEY": KEY},
        [],
    ),
    "vertex": (
        "/v1/projects/p1/locations/us-central1/publishers/google/models/"
        "gemini-2.5-pro:streamGenerateContent?alt=sse",
        {"VERTEX_TOKEN": KEY},
        ["--api-key-env", "VERTEX_TOKEN"],
    ),
    "azure": (
        "/openai/deployments/prod-gpt/chat/completions?api-version=2024-10-21",
        {"AZURE_OPENAI_API_KEY": KEY},
        [],
    ),
    "azure-v1": ("/openai/v1/chat/completions", {"AZURE_OPENAI_AD_TOKEN": KEY}, []),
    "cohere": ("/v2/chat", {"CO_API_KEY": KEY}, []),
}
#: The model each URL names (the /openai/v1/ path names none: the default, or -m).
MODELS = {
    "gemini": "gemini-2.5-flash",
    "vertex": "gemini-2.5-pro",
    "azure": "prod-gpt",
    "azure-v1": "gpt-4o-mini",
    "cohere": "command-a-03-2025",
}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(
        tls=True,
        tmp_path=tmp_path_factory.mktemp("keyed-dialects"),
        extra_args=["--api-key-env", "PP_TEST_SERVER_KEY", "--rate", "0"],
        env={"PP_TEST_SERVER_KEY": KEY},
    ) as server:
        yield server


def run(
    server: RefServer, dialect: str, http: str, *headers: str
) -> tuple[int, dict[str, Any], str]:
    path, env, extra = DIALECTS[dialect]
    args = ["run", f"https://localhost:{server.port}{path}", "--cacert", str(server.ca)]
    args += ["--http", http, "--json", *extra]
    for header in headers:
        args += ["-H", header]
    res = run_cli(*args, environ=env)
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    assert KEY not in res.stdout and KEY not in res.stderr
    return res.exit_code, body, res.stderr


@pytest.mark.parametrize("http", ["1.1", "2"])
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_stream_traces_with_its_stages_tokens_and_usage(
    keyed: RefServer, dialect: str, http: str
) -> None:
    code, body, stderr = run(keyed, dialect, http, "x-promptpath-tokens: 7")
    assert code == ExitCode.OK, stderr
    provider = dialect.split("-")[0]
    assert body["target"]["provider"] == provider
    assert body["target"]["model"] == MODELS[dialect]
    assert body["http_version"] == ("HTTP/2" if http == "2" else "HTTP/1.1")
    for stage in ("dns", "connect", "tls"):
        assert stage in body["stages_ms"]
    assert body["stream"]["end"] == "marker"
    assert body["tokens"]["count"] == 7 and body["tokens"]["count_source"] == "usage"
    assert body["tokens"]["events"] == 7
    # Azure's prompt-filter chunk and its one verdict chunk: counted, not tokens.
    assert body["stream"]["filter_events"] == (2 if provider == "azure" else 0)
    if provider == "azure":
        assert "2 content-filter events" in stderr


@pytest.mark.parametrize("http", ["1.1", "2"])
@pytest.mark.parametrize("dialect", ["gemini", "vertex", "azure", "cohere"])
def test_an_in_band_error_exits_7_and_keeps_the_tokens_that_came(
    keyed: RefServer, dialect: str, http: str
) -> None:
    code, body, _ = run(keyed, dialect, http, "x-promptpath-error-after: 3")
    assert code == ExitCode.STREAM
    assert body["ok"] is False
    assert body["error"]["stage"] == "stream" and body["error"]["kind"] == "error_event"
    assert body["stream"]["end"] == "error"
    assert body["tokens"]["events"] == 3
    if dialect in ("gemini", "vertex"):  # the google.rpc.Status, as google-genai shows it
        assert "INTERNAL (500)" in body["stream"]["error"]
    if dialect == "cohere":  # a message-end with finish_reason ERROR, its usage kept
        assert body["stream"]["error"].startswith("ERROR: internal server error")
        assert body["tokens"]["count"] == 3 and body["tokens"]["count_source"] == "usage"


def test_a_gemini_error_answer_is_plain_json_named_by_its_status(keyed: RefServer) -> None:
    code, body, _ = run(keyed, "gemini", "1.1", "x-promptpath-status: 429")
    assert code == ExitCode.HTTP_STATUS
    assert body["error"]["kind"] == "http_429"
    assert "You exceeded your current quota" in body["error"]["message"]


def test_a_wrong_key_is_a_401_from_the_keyed_server(keyed: RefServer) -> None:
    path, _, _ = DIALECTS["gemini"]
    res = run_cli(
        "run",
        f"https://localhost:{keyed.port}{path}",
        "--cacert",
        str(keyed.ca),
        "--json",
        environ={"GEMINI_API_KEY": "wrong"},
    )
    assert res.exit_code == ExitCode.HTTP_STATUS
    assert json.loads(res.stdout)["error"]["kind"] == "http_401"


@pytest.mark.parametrize("dialect", ["gemini", "azure", "cohere"])
def test_serves_first_token_delay_and_pause_shape_the_trace(keyed: RefServer, dialect: str) -> None:
    code, body, _ = run(
        keyed,
        dialect,
        "2",
        "x-promptpath-ttft-ms: 300",
        "x-promptpath-tokens: 6",
        "x-promptpath-pause-after: 3",
        "x-promptpath-pause-s: 0.5",
    )
    assert code == ExitCode.OK
    # Lower bounds only: the delays are the server's floor; a loaded machine adds to them.
    assert body["ttft_ms"]["from_request"] >= 300
    # The pause is the server's sleep after its write of token 3; that write can leave a
    # moment after the sleep's clock started, so the gap on the wire may read a little
    # under it (498.1 ms seen once at load 7 for a 0.5 s pause), and a client read late for
    # token 3 shortens it more (482.7 ms under the suite's 3 workers at load 5-7). Without
    # the pause the longest gap is a few ms: 400 still proves the pause shaped the trace.
    assert max(body["tokens"]["gaps"]) >= 400
    assert body["tokens"]["count"] == 6


def test_vertex_without_a_named_token_variable_says_how_to_name_one(keyed: RefServer) -> None:
    path, _, _ = DIALECTS["vertex"]
    res = run_cli(
        "run", f"https://localhost:{keyed.port}{path}", "--cacert", str(keyed.ca), environ={}
    )
    assert res.exit_code == ExitCode.HTTP_STATUS
    assert "no API key was sent: name its variable with --api-key-env" in res.stderr
