"""Error and warning messages that tell the user what to do next (issue 10, Messages)."""

from __future__ import annotations

from promptpath.core.timeline import Timeline
from promptpath.options import RunOptions, parse_target
from promptpath.tracer.ingest import status_error
from promptpath.tracer.request import key_sent, request_headers


def _options(**kw: object) -> RunOptions:
    return RunOptions(
        target=parse_target("http://127.0.0.1:9/v1/chat/completions"),
        provider="openai",
        model="m",
        **kw,  # type: ignore[arg-type]
    )


def _401() -> Timeline:
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    tl.status = 401
    return tl


def test_401_without_a_key_says_none_was_sent_and_how_to_give_one() -> None:
    err = status_error(
        _401(), b'{"error":{"message":"no key"}}', key_env="OPENAI_API_KEY", key_sent=False
    )
    assert "no API key was sent" in str(err)
    assert "OPENAI_API_KEY" in str(err)
    assert "-H" in str(err)


def test_401_with_a_key_asks_to_check_it() -> None:
    err = status_error(_401(), b"", key_env="OPENAI_API_KEY", key_sent=True)
    assert "check the API key (OPENAI_API_KEY)" in str(err)
    assert "no API key was sent" not in str(err)


def test_key_sent_sees_the_environment_key_and_each_key_header() -> None:
    assert not key_sent(_options())
    assert key_sent(_options(api_key="sk-env"))
    for name in ("Authorization", "x-api-key", "api-key"):
        assert key_sent(_options(headers=((name, "k"),)))


def test_an_azure_api_key_header_replaces_the_environment_key() -> None:
    headers = request_headers(_options(api_key="sk-env", headers=(("api-key", "azure"),)))
    values = [v for _, v in headers]
    assert "azure" in values
    assert not any("sk-env" in v for v in values)
