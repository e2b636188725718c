from __future__ import annotations

import json

from promptpath.options import RunOptions, parse_target
from promptpath.tracer.request import prepare, redact_headers


def _opts(provider: str, **kw: object) -> RunOptions:
    return RunOptions(
        target=parse_target("https://h/x"),
        provider=provider,
        model="m",
        **kw,  # type: ignore[arg-type]
    )


def test_openai_body_asks_for_usage_and_streaming() -> None:
    req = prepare(_opts("openai", api_key="sk-1"))
    body = json.loads(req.body)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert ("authorization", "Bearer sk-1") in req.headers
    assert ("accept-encoding", "identity") in req.headers


def test_anthropic_uses_x_api_key_and_version() -> None:
    req = prepare(_opts("anthropic", api_key="k"))
    names = dict(req.headers)
    assert names["x-api-key"] == "k" and "anthropic-version" in names
    assert "authorization" not in names


def test_user_authorization_header_wins_over_env_key() -> None:
    req = prepare(_opts("openai", api_key="env", headers=(("Authorization", "Bearer mine"),)))
    auth = [v for n, v in req.headers if n.lower() == "authorization"]
    assert auth == ["Bearer mine"]


def test_ollama_is_ndjson_with_num_predict() -> None:
    req = prepare(_opts("ollama", max_tokens=7))
    assert req.expects == "application/x-ndjson"
    assert json.loads(req.body)["options"] == {"num_predict": 7}


def test_redaction_keeps_presence_not_value() -> None:
    shown = redact_headers([("Authorization", "Bearer sk"), ("x-api-key", "k"), ("accept", "a")])
    assert shown == [("Authorization", "[redacted]"), ("x-api-key", "[redacted]"), ("accept", "a")]


def test_any_header_that_names_itself_a_credential_is_redacted() -> None:
    shown = dict(
        redact_headers(
            [("X-Goog-Api-Key", "G"), ("x-auth-token", "T"), ("Set-Cookie", "c"), ("accept", "a")]
        )
    )
    assert shown == {
        "X-Goog-Api-Key": "[redacted]",
        "x-auth-token": "[redacted]",
        "Set-Cookie": "[redacted]",
        "accept": "a",
    }
