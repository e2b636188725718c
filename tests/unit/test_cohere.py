"""Cohere v2: detection, key variables, the request cohere 7.3.1 sends, the decoder.

The request facts were observed on loopback (cohere 7.3.1 ClientV2.chat_stream on httpx
0.28, Python 3.11.7): POST /v2/chat HTTP/1.1, body {"model", "messages", "max_tokens",
"stream": true} (the fields not given left out), headers Accept */*, Accept-Encoding gzip,
deflate, User-Agent cohere/7.3.1, X-Fern-Language Python, X-Fern-Runtime, X-Fern-Platform,
X-Fern-SDK-Name cohere, X-Fern-SDK-Version 7.3.1, Authorization: Bearer KEY, content-type
application/json. The recorded streams (tests/data/streams/cohere*.sse) were written by
hand in the documented shapes and replayed to that SDK on loopback, which parsed every
event (its message-end with delta.error included: it raises nothing on it).
"""

from __future__ import annotations

import json

import pytest

from promptpath.cli.commands import RunArgs, build_options
from promptpath.core.timeline import Usage
from promptpath.dialects.cohere import CohereDecoder
from promptpath.dialects.plugins import decoder_for, detect_provider, key_from_env
from promptpath.streams.sse import SSEMessage
from promptpath.tracer.request import prepare
from tests.unit.test_dialects import content, decode_file

COHERE = "https://api.cohere.com/v2/chat"


def sse(obj: object) -> SSEMessage:
    name = obj.get("type", "message") if isinstance(obj, dict) else "message"
    return SSEMessage(event=str(name), data=json.dumps(obj), id=None, retry=None, t_ns=7)


@pytest.mark.parametrize(
    "path",
    ["/v2/chat", "/v2/chat/", "/cohere/v2/chat", "/v2/chat?x=1"],
)
def test_the_v2_chat_path_is_cohere(path: str) -> None:
    assert detect_provider(path) == "cohere"


def test_v1_chat_and_other_v2_paths_are_not_cohere() -> None:
    assert detect_provider("/v1/chat") is None
    assert detect_provider("/v2/chat/completions") == "openai"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"CO_API_KEY": "c"}, ("CO_API_KEY", "c")),
        ({"COHERE_API_KEY": "h"}, ("COHERE_API_KEY", "h")),
        # cohere 7.3.1 _get_api_key_from_environment: CO_API_KEY first.
        ({"CO_API_KEY": "c", "COHERE_API_KEY": "h"}, ("CO_API_KEY", "c")),
        ({}, ("CO_API_KEY", None)),
    ],
)
def test_the_key_comes_from_the_variables_the_sdk_reads(
    env: dict[str, str], expected: tuple[str, str | None]
) -> None:
    assert key_from_env("cohere", None, env) == expected


def test_the_request_is_what_chat_stream_sends() -> None:
    opts = build_options(RunArgs(target=COHERE, max_tokens=16), environ={"CO_API_KEY": "k"})
    assert (opts.provider, opts.model, opts.client, opts.http) == (
        "cohere",
        "command-a-03-2025",
        "cohere",
        "1.1",
    )
    req = prepare(opts)
    assert json.loads(req.body) == {
        "model": "command-a-03-2025",
        "messages": [{"role": "user", "content": opts.prompt}],
        "max_tokens": 16,
        "stream": True,
    }
    assert list(req.headers) == [
        ("content-type", "application/json"),
        ("accept", "*/*"),
        ("accept-encoding", "gzip, deflate"),
        ("user-agent", "cohere/7.3.1 promptpath/0.1"),
        ("x-fern-language", "Python"),
        ("x-fern-sdk-name", "cohere"),
        ("x-fern-sdk-version", "7.3.1"),
        ("authorization", "Bearer k"),
    ]


def test_the_decoder_is_cohere_s_own() -> None:
    assert isinstance(decoder_for("cohere"), CohereDecoder)


def test_thinking_is_reasoning_text_is_text_citations_are_meta() -> None:
    events = decode_file("cohere.sse", "cohere")
    assert content(events) == [
        ("reasoning", "The user asks about BGP flaps."),
        ("text", "Check the hold timer"),
        ("text", " and the MTU."),
    ]
    names = [e.name for e in events if e.kind == "meta"]
    assert "citation-start" in names and "message-start" in names


def test_message_end_is_the_end_with_the_model_s_tokens_not_the_billed_units() -> None:
    events = decode_file("cohere.sse", "cohere")
    assert [e.kind for e in events].count("end") == 1
    end = events[-1]
    assert end.kind == "end" and end.text == "finish_reason=COMPLETE"
    assert end.usage == Usage(input_tokens=205, output_tokens=40)


def test_tool_plan_is_reasoning_tool_calls_are_tool_events_float_counts_are_read() -> None:
    events = decode_file("cohere_tools.sse", "cohere")
    assert content(events) == [
        ("reasoning", "I will look up"),
        ("reasoning", " the router."),
        ("tool", ""),  # tool-call-start names the call
        ("tool", '{"device": '),
        ("tool", '"r1"}'),
    ]
    assert events[-1].usage == Usage(input_tokens=900, output_tokens=41)


def test_a_message_end_with_an_error_is_an_in_band_error_keeping_its_usage() -> None:
    events = decode_file("cohere_error.sse", "cohere")
    assert [e.kind for e in events] == ["meta", "meta", "content", "meta", "error"]
    err = events[-1]
    assert err.error == "ERROR: internal server error, this has been reported to our developers"
    # No "tokens" in this usage: the billed units are the fallback.
    assert err.usage == Usage(input_tokens=9, output_tokens=1)


@pytest.mark.parametrize(
    ("delta", "said"),
    [
        ({"finish_reason": "TIMEOUT"}, "TIMEOUT"),
        ({"error": "model overloaded"}, "model overloaded"),
    ],
)
def test_a_timeout_or_an_error_alone_fails_the_stream(delta: dict[str, str], said: str) -> None:
    (event,) = CohereDecoder().decode(sse({"type": "message-end", "delta": delta}))
    assert event.kind == "error" and event.error == said


@pytest.mark.parametrize("reason", ["MAX_TOKENS", "STOP_SEQUENCE", "TOOL_CALL", ""])
def test_other_finish_reasons_end_the_stream(reason: str) -> None:
    delta = {"finish_reason": reason} if reason else {}
    (event,) = CohereDecoder().decode(sse({"type": "message-end", "delta": delta}))
    assert event.kind == "end"


def test_done_line_ends_it_as_the_sdk_stops_there_and_unknown_events_are_meta() -> None:
    d = CohereDecoder()
    done = SSEMessage(event="message", data="[DONE]", id=None, retry=None, t_ns=1)
    assert [e.kind for e in d.decode(done)] == ["end"]
    assert [e.kind for e in d.decode(sse({"type": "debug", "prompt": "x"}))] == ["meta"]
    # A fractional count is no count: named as untrusted; a boolean is not a number at all.
    bad = {"type": "message-end", "delta": {"usage": {"tokens": {"output_tokens": 1.5}}}}
    assert d.decode(sse(bad))[0].usage == Usage(untrusted=("output_tokens",))
    flag = {"type": "message-end", "delta": {"usage": {"tokens": {"output_tokens": True}}}}
    assert d.decode(sse(flag))[0].usage is None
