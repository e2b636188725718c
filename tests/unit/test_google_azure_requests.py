"""Gemini, Vertex and Azure OpenAI requests: detection, key variables, auth, body, shape.

The google-genai facts were observed on loopback (google-genai 3.6.1 on httpx2, Python
3.11.7): POST /v1/models/M:streamGenerateContent?alt=sse, body
{"contents": [{"parts": [{"text": P}], "role": "user"}], "generationConfig":
{"maxOutputTokens": N}}, headers Accept */*, Accept-Encoding gzip, deflate,
Content-Type application/json, x-goog-api-key, and user-agent = x-goog-api-client =
"google-genai-sdk/3.6.1 gl-python/3.11.7".
"""

from __future__ import annotations

import json
import platform

import pytest

from promptpath.cli.commands import RunArgs, build_options
from promptpath.dialects.plugins import key_from_env, model_from_path
from promptpath.report.redact import Redactor
from promptpath.tracer.request import prepare, redact_headers

GEMINI = "https://h/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
VERTEX = (
    "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1"
    "/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
)
AZURE = (
    "https://r.openai.azure.com/openai/deployments/prod-gpt/chat/completions?api-version=2024-10-21"
)
GENAI_UA = f"google-genai-sdk/3.6.1 gl-python/{platform.python_version()}"


def headers(url: str, env: dict[str, str], **kw: object) -> dict[str, str]:
    opts = build_options(RunArgs(target=url, **kw), environ=env)  # type: ignore[arg-type]
    return dict(prepare(opts).headers)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"GEMINI_API_KEY": "g"}, ("GEMINI_API_KEY", "g")),
        ({"GOOGLE_API_KEY": "o"}, ("GOOGLE_API_KEY", "o")),
        # google-genai 3.6.1 get_env_api_key: GOOGLE_API_KEY wins when both are set.
        ({"GEMINI_API_KEY": "g", "GOOGLE_API_KEY": "o"}, ("GOOGLE_API_KEY", "o")),
        ({"GEMINI_API_KEY": ""}, ("GOOGLE_API_KEY", None)),
        ({}, ("GOOGLE_API_KEY", None)),
    ],
)
def test_gemini_key_comes_from_the_variables_google_genai_reads(
    env: dict[str, str], expected: tuple[str, str | None]
) -> None:
    assert key_from_env("gemini", None, env) == expected


def test_a_named_variable_is_the_only_one_read() -> None:
    assert key_from_env("gemini", "MY_KEY", {"GEMINI_API_KEY": "g"}) == ("MY_KEY", None)
    assert key_from_env("vertex", None, {"GOOGLE_API_KEY": "o"}) == (None, None)


def test_gemini_request_is_what_google_genai_sends() -> None:
    opts = build_options(RunArgs(target=GEMINI, max_tokens=16), environ={"GEMINI_API_KEY": "k"})
    assert (opts.provider, opts.model, opts.client, opts.http) == (
        "gemini",
        "gemini-2.5-pro",
        "google-genai",
        "1.1",
    )
    req = prepare(opts)
    assert json.loads(req.body) == {
        "contents": [{"parts": [{"text": opts.prompt}], "role": "user"}],
        "generationConfig": {"maxOutputTokens": 16},
    }
    assert list(req.headers) == [
        ("content-type", "application/json"),
        ("accept", "*/*"),
        ("accept-encoding", "gzip, deflate"),
        ("user-agent", f"{GENAI_UA} promptpath/0.1"),
        ("x-goog-api-client", GENAI_UA),
        ("x-goog-api-key", "k"),
    ]
    assert req.expects == "text/event-stream"


def test_vertex_sends_the_named_variables_token_as_bearer() -> None:
    got = headers(VERTEX, {"TOK": "ya29.t"}, api_key_env="TOK")
    assert got["authorization"] == "Bearer ya29.t"
    assert "x-goog-api-key" not in got
    opts = build_options(RunArgs(target=VERTEX), environ={})
    assert (opts.provider, opts.model, opts.api_key) == ("vertex", "gemini-2.5-flash", None)


def test_azure_key_goes_in_api_key_and_an_entra_token_as_bearer() -> None:
    got = headers(AZURE, {"AZURE_OPENAI_API_KEY": "az"})
    assert got["api-key"] == "az" and "authorization" not in got
    got = headers(AZURE, {"AZURE_OPENAI_AD_TOKEN": "eyJ"})
    assert got["authorization"] == "Bearer eyJ" and "api-key" not in got
    # Both set: the key, as AzureOpenAI prefers api_key over azure_ad_token.
    got = headers(AZURE, {"AZURE_OPENAI_API_KEY": "az", "AZURE_OPENAI_AD_TOKEN": "eyJ"})
    assert got["api-key"] == "az" and "authorization" not in got
    # A bearer header given with -H replaces the key from the environment.
    got = headers(AZURE, {"AZURE_OPENAI_API_KEY": "az"}, headers=["Authorization: Bearer x"])
    assert "api-key" not in got


def test_azure_request_is_the_openai_chat_body_with_the_deployment_as_model() -> None:
    opts = build_options(RunArgs(target=AZURE), environ={})
    assert (opts.provider, opts.model, opts.client) == ("azure", "prod-gpt", "openai-python")
    body = json.loads(prepare(opts).body)
    assert body["model"] == "prod-gpt" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_model_given_with_m_wins_over_the_path() -> None:
    assert build_options(RunArgs(target=GEMINI, model="x"), environ={}).model == "x"
    assert model_from_path("openai", "/v1/models/x/chat/completions") is None
    assert model_from_path("gemini", "/v1beta/tunedModels/t1:streamGenerateContent") == "t1"


def test_google_and_azure_key_headers_are_redacted() -> None:
    shown = dict(redact_headers([("x-goog-api-key", "k"), ("api-key", "az")]))
    assert shown == {"x-goog-api-key": "[redacted]", "api-key": "[redacted]"}
    assert "k3y-value" not in Redactor.of(["k3y-value"]).text("x k3y-value y")
