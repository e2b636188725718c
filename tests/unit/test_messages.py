"""Error and warning messages that tell the user what to do next (issue 10, Messages)."""

from __future__ import annotations

import json

import pytest

from promptpath.core.errors import StreamError
from promptpath.core.timeline import InvalidUTF8, Timeline
from promptpath.dialects.sniff import other_dialect, provider_hint
from promptpath.options import ConnectTo, RunOptions, parse_target
from promptpath.streams.ndjson import NDJSONDecoder
from promptpath.tracer.ingest import BodyIngest, status_error
from promptpath.tracer.request import key_sent, request_headers
from tests.helpers.cli import run_cli


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


ANTHROPIC_STREAM = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"usage":{"input_tokens":3}}}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"hi"}}\n\n'
    b"event: message_stop\n"
    b'data: {"type":"message_stop"}\n\n'
)
OPENAI_STREAM = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\ndata: [DONE]\n\n'


def test_an_anthropic_stream_read_as_openai_names_the_provider_to_try() -> None:
    assert other_dialect(ANTHROPIC_STREAM, "openai") == "anthropic"
    assert "try --provider anthropic" in provider_hint(ANTHROPIC_STREAM, "openai")


def test_an_openai_stream_read_as_anthropic_names_openai() -> None:
    assert other_dialect(OPENAI_STREAM, "anthropic") == "openai"


def test_bytes_no_dialect_parses_give_no_hint() -> None:
    assert provider_hint(b"<html>bad gateway</html>", "openai") == ""
    assert provider_hint(b"", "openai") == ""


def test_a_truncated_stream_with_no_token_in_this_dialect_carries_the_hint() -> None:
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    tl.response_headers = [("content-type", "text/event-stream")]
    ingest = BodyIngest(tl, "openai")
    ingest.feed(ANTHROPIC_STREAM, 1, 0)
    with pytest.raises(StreamError) as info:
        ingest.finish(2)
    assert info.value.kind == "truncated"
    assert "try --provider anthropic" in str(info.value)
    assert info.value.message == str(info.value)


def test_a_body_that_only_repeats_the_status_is_not_printed_twice() -> None:
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    tl.status = 529
    body = b'{"error":{"message":"HTTP 529","type":"server_error","param":null,"code":null}}'
    err = status_error(tl, body, key_env=None)
    assert str(err) == "HTTP 529 — the provider is overloaded"


def test_a_resolve_entry_for_another_host_or_port_is_unused() -> None:
    options = _options(resolve=(("127.0.0.1", 9, "127.0.0.2"), ("api.example", 443, "::1")))
    assert options.unused_resolve() == ["api.example:443:::1"]


def test_a_resolve_entry_for_the_connect_to_destination_is_used() -> None:
    rule = ConnectTo(host=None, port=None, to_host="backend", to_port=8443, spec="::backend:8443")
    options = _options(resolve=(("backend", 8443, "127.0.0.1"),), connect_to=(rule,))
    assert options.unused_resolve() == []


def test_an_unused_resolve_entry_is_a_one_line_warning_on_stderr() -> None:
    # Port 9 on loopback refuses at once: the run fails in connect, after the warning.
    result = run_cli(
        "run",
        "http://127.0.0.1:9/v1/chat/completions",
        "--resolve",
        "typo:9:127.0.0.1",
        "--timeout",
        "2",
        "--json",
    )
    warnings = [line for line in result.stderr.splitlines() if "warning" in line]
    assert warnings == [
        "promptpath: warning: --resolve typo:9:127.0.0.1 matches nothing (127.0.0.1:9)"
    ]
    json.loads(result.stdout)


def test_invalid_utf8_inside_events_is_counted_not_silently_replaced() -> None:
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    tl.response_headers = [("content-type", "text/event-stream")]
    ingest = BodyIngest(tl, "openai")
    # Two bad sequences in one event, one split across reads in another, and a genuine
    # U+FFFD (valid UTF-8) that must not count.
    ingest.feed(b'data: {"choices":[{"delta":{"content":"a\xff\xfe"}}]}\n\ndata: {"choices"', 1, 0)
    ingest.feed(b':[{"delta":{"content":"\xe2\x82"}}]}\n\n', 2, 1)
    ingest.feed(
        b'data: {"choices":[{"delta":{"content":"\xef\xbf\xbd"}}]}\n\ndata: [DONE]\n\n', 3, 2
    )
    ingest.finish(4)
    assert tl.invalid_utf8 == InvalidUTF8(events=2, replacements=3)
    assert [e.text for e in tl.events if e.kind == "content"] == [
        "a\ufffd\ufffd",
        "\ufffd",
        "\ufffd",
    ]


def test_invalid_utf8_in_an_ndjson_line_is_counted() -> None:
    line = NDJSONDecoder().feed(b'{"a":"\xff"}\n{"b":1}\n', 1)
    assert [x.invalid_utf8 for x in line] == [1, 0]


@pytest.mark.parametrize("split", [False, True])
def test_an_error_chunk_followed_by_done_is_still_an_error(split: bool) -> None:
    # Gateways (and OpenAI itself) send {"error": ...} inside a 200 stream and then
    # [DONE]; openai-python raises APIError on the error chunk. Once reported as a clean
    # success (exit 0) because the marker overwrote the error.
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    tl.response_headers = [("content-type", "text/event-stream")]
    ingest = BodyIngest(tl, "openai")
    token = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n'
    error = b'data: {"error":{"message":"upstream overloaded","type":"server_error"}}\n\n'
    done = b"data: [DONE]\n\n"
    if split:
        for i, piece in enumerate((token, error, done)):
            ingest.feed(piece, i + 1, i)
    else:
        ingest.feed(token + error + done, 1, 0)
    with pytest.raises(StreamError) as info:
        ingest.finish(5)
    assert info.value.kind == "error_event"
    assert "upstream overloaded" in info.value.message
    assert tl.stream_end == "error"
    assert [e.text for e in tl.events if e.kind == "content"] == ["hi"]  # kept
