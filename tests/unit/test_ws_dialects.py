"""The WebSocket dialects as the decoders and the option checks see them (pure)."""

from __future__ import annotations

import json

import pytest

from promptpath.core.errors import UsageError
from promptpath.dialects.stream import StreamDecoder
from promptpath.plan.resolve import trace_options, values_for
from promptpath.tracer.request import prepare


def decode(provider: str, *messages: dict[str, object]) -> list[tuple[str, str, str]]:
    decoder = StreamDecoder(provider, messages=True)  # type: ignore[arg-type]
    events = []
    for n, message in enumerate(messages):
        events += decoder.feed(json.dumps(message).encode(), n, n)
    return [(e.kind, e.name, e.error or e.text) for e in events]


def test_realtime_text_deltas_under_both_names_are_tokens_and_response_done_ends() -> None:
    got = decode(
        "realtime",
        {"type": "session.created", "session": {}},
        {"type": "response.output_text.delta", "delta": "a"},
        {"type": "response.text.delta", "delta": "b"},  # the beta API's name
        {"type": "response.output_audio_transcript.delta", "delta": "c"},
        {
            "type": "response.done",
            "response": {"status": "completed", "usage": {"output_tokens": 3}},
        },
    )
    assert [k for k, _, _ in got] == ["meta", "content", "content", "content", "end"]
    assert [t for k, _, t in got if k == "content"] == ["a", "b", "c"]


def test_realtime_failures_are_in_band_errors() -> None:
    failed = {
        "type": "response.done",
        "response": {
            "status": "failed",
            "status_details": {"error": {"type": "server_error", "message": "x"}},
        },
    }
    assert decode("realtime", failed) == [("error", "response.done", "server_error: x")]
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
    assert decode("realtime", error) == [("error", "error", "invalid_request_error: bad")]


def test_responses_messages_decode_as_its_sse_events_do() -> None:
    got = decode(
        "responses",
        {"type": "response.created", "response": {}},
        {"type": "response.output_text.delta", "delta": "hi"},
        {"type": "response.completed", "response": {"usage": {"output_tokens": 1}}},
    )
    assert [k for k, _, _ in got] == ["meta", "content", "end"]


def test_a_message_is_one_event_however_its_json_is_laid_out() -> None:
    decoder = StreamDecoder("responses", messages=True)
    text = '{\n  "type": "response.output_text.delta",\n\n  "delta": "x"\n}'
    assert [e.text for e in decoder.feed(text.encode(), 1, 0)] == ["x"]


def options(url: str, **given: object):  # type: ignore[no-untyped-def]
    return trace_options(values_for(url, **given), {})


def test_ws_targets_pick_the_websocket_dialects_and_send_what_the_sdk_sends() -> None:
    realtime = options("wss://api.example/v1/realtime?model=gpt-realtime")
    assert realtime.provider == "realtime" and realtime.target.websocket
    assert realtime.target.scheme == "https" and realtime.target.port == 443
    prepared = prepare(realtime)
    assert prepared.method == "GET" and prepared.body == b""
    first, create = (json.loads(m) for m in prepared.messages)
    assert first["type"] == "conversation.item.create"
    assert create["type"] == "response.create"
    assert create["response"]["output_modalities"] == ["text"]
    responses = options("ws://127.0.0.1:9/v1/responses", model="gpt-5")
    (create,) = (json.loads(m) for m in prepare(responses).messages)
    # openai 3.57's responses.connect() sends the fields at the top level, no "stream".
    assert create["type"] == "response.create" and create["model"] == "gpt-5"
    assert "stream" not in create
    names = {n.lower() for n, _ in prepare(responses).headers}
    assert "accept-encoding" not in names  # its websockets client offers none


@pytest.mark.parametrize(
    ("url", "given", "words"),
    [
        ("ws://127.0.0.1:9/v1/chat/completions", {}, "speaks WebSocket"),
        ("https://127.0.0.1:9/v1/realtime", {}, "WebSocket only"),
        ("ws://127.0.0.1:9/v1/responses", {"http": "2"}, "HTTP/1.1"),
        ("https://127.0.0.1:9/v1/responses", {"ws_ping_ms": 10.0}, "ws:// or wss://"),
        ("ws://127.0.0.1:9/v1/responses", {"ws_ping_count": 3}, "--ws-ping-ms"),
        ("ws://127.0.0.1:9/v1/responses", {"ws_ping_ms": 0.0}, "at least 1 ms"),
        ("ws://127.0.0.1:9/v1/responses", {"ws_ping_ms": 5.0, "ws_ping_count": 0}, "between 1"),
    ],
)
def test_websocket_option_mistakes_are_one_line_usage_errors(
    url: str, given: dict[str, object], words: str
) -> None:
    with pytest.raises(UsageError, match=words):
        options(url, **given)


def test_pings_default_to_ten_with_an_interval() -> None:
    got = options("ws://127.0.0.1:9/v1/responses", ws_ping_ms=50.0)
    assert (got.ws_ping_ms, got.ws_ping_count) == (50.0, 10)
