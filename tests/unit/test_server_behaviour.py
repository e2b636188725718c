"""The reference endpoint's pure parts: control parsing, framing, tokens, dialect shapes.

(No sockets here; these live beside the server's socket tests because they pin the same
contract the client relies on.)
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from promptpath.server.behaviour import (
    CONTROLS,
    Behaviour,
    BehaviourError,
    applied,
    from_headers,
    from_request,
    parse_control,
)
from promptpath.server.command import build_behaviour
from promptpath.server.dialect import Event, RequestInfo, RequestParams, frame, keepalive
from promptpath.server.routing import DIALECTS, dialect_for_path
from promptpath.server.tokens import answer_tokens, words

DEFAULTS = Behaviour(ttft_ms=100, rate=10)


def test_no_control_headers_keeps_the_defaults() -> None:
    assert from_headers(DEFAULTS, {"content-type": "application/json"}) is DEFAULTS


def test_headers_override_defaults_case_insensitively_from_str_or_bytes() -> None:
    got = from_headers(
        DEFAULTS,
        [
            (b"X-PromptPath-TTFT-ms", b"250.5"),
            (b"x-promptpath-tokens", b"7"),
            ("x-promptpath-truncate-after", "3"),
            ("x-promptpath-body", "HTML"),
            ("x-promptpath-accel-buffering", "no"),
        ],
    )
    assert got == dataclasses.replace(
        DEFAULTS, ttft_ms=250.5, tokens=7, truncate_after=3, body="html", accel_buffering="no"
    )


def test_off_switches_an_optional_control_off() -> None:
    defaults = Behaviour(error_after=3)
    assert from_headers(defaults, {"x-promptpath-error-after": "off"}).error_after is None
    with pytest.raises(BehaviourError, match="needs a value"):
        from_headers(defaults, {"x-promptpath-rate": ""})


@pytest.mark.parametrize(
    ("header", "value"),
    [
        ("x-promptpath-rate", "nan"),
        ("x-promptpath-rate", "-1"),
        ("x-promptpath-tokens", "1.5"),
        ("x-promptpath-status", "42"),
        ("x-promptpath-status", "101"),
        ("x-promptpath-batch", "0"),
        ("x-promptpath-body", "xml"),
        ("x-promptpath-accel-buffering", "maybe"),
        ("x-promptpath-nonsense", "1"),
        ("x-promptpath-keepalive-s", "1e-300"),  # would flood keepalives in a busy loop
        ("x-promptpath-keepalive-s", "-1"),
        ("x-promptpath-keepalive-s", "inf"),
    ],
)
def test_bad_values_name_the_header(header: str, value: str) -> None:
    with pytest.raises(BehaviourError) as info:
        from_headers(DEFAULTS, {header: value})
    assert info.value.header == header
    assert header in str(info.value)


def test_flags_are_validated_like_headers() -> None:
    assert build_behaviour({"rate": 0, "tokens": None, "status": 429}) == Behaviour(
        rate=0, status=429
    )
    assert parse_control("keepalive-s", "0.5") == 0.5
    assert parse_control("keepalive-s", "0") == 0.0  # off
    with pytest.raises(BehaviourError) as info:
        build_behaviour({"batch": 0})
    assert info.value.header == "--batch"


def test_behaviour_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULTS.rate = 1  # type: ignore[misc]


# -- framing -------------------------------------------------------------------------------


def test_json_events_carry_the_send_stamp_as_a_top_level_key() -> None:
    wire = frame(Event({"type": "ping"}, name="ping"), sse=True, seq=4, sent_unix_ns=123)
    assert (
        wire == b'event: ping\ndata: {"type":"ping","promptpath":{"seq":4,"sent_unix_ns":123}}\n\n'
    )
    line = frame(Event({"done": False}), sse=False, seq=0, sent_unix_ns=9)
    assert json.loads(line) == {"done": False, "promptpath": {"seq": 0, "sent_unix_ns": 9}}
    assert line.endswith(b"}\n") and line.count(b"\n") == 1


def test_verbatim_events_and_keepalives() -> None:
    assert frame(Event("[DONE]"), sse=True, seq=9, sent_unix_ns=1) == b"data: [DONE]\n\n"
    assert keepalive(seq=3, sent_unix_ns=77) == b": keepalive seq=3 sent_unix_ns=77\n\n"


def test_tokens_are_words_with_leading_spaces_repeated_as_needed() -> None:
    base = words()
    assert base[0] == "A" and all(t.startswith((" ", "\n")) for t in base[1:])
    long = answer_tokens(len(base) + 3)
    assert long[: len(base)] == base
    assert long[len(base)].startswith("\n\n") and len(long) == len(base) + 3
    assert answer_tokens(0) == []


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/v1/chat/completions", "openai"),
        ("/openai/v1/chat/completions", "azure"),
        ("/v1beta/models/m:streamGenerateContent", "gemini"),
        ("/v1/responses", "responses"),
        ("/v1/messages", "anthropic"),
        ("/api/chat", "ollama"),
    ],
)
def test_paths_select_dialects(path: str, name: str) -> None:
    dialect = dialect_for_path(path)
    assert dialect is not None and dialect.name == name
    assert dialect_for_path("/v1/embeddings") is None


@pytest.mark.parametrize("name", sorted(DIALECTS))
def test_every_dialect_has_a_broken_event_and_json_everything_else(name: str) -> None:
    cls = DIALECTS[name]
    params = cls.parse_request(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "a b c"}],
            "input": "a b c",
            "contents": [{"role": "user", "parts": [{"text": "a b c"}]}],
        }
    )
    dialect = cls(RequestInfo(id="abc", created_unix=1, created_iso="x", params=params))
    events = [*dialect.opening(), dialect.token(" hi"), *dialect.closing("stop", 1, 10)]
    events += dialect.error()
    for event in events:
        if isinstance(event.data, str):
            assert event.data == "[DONE]"
        else:
            json.dumps(event.data)
    broken = dialect.malformed().data
    assert isinstance(broken, str)
    with pytest.raises(ValueError):
        json.loads(broken)
    assert params.prompt_tokens >= 3


def test_request_parsing_reads_each_dialects_token_limit() -> None:
    assert DIALECTS["openai"].parse_request({"max_completion_tokens": 5}).max_tokens == 5
    assert DIALECTS["responses"].parse_request({"max_output_tokens": 6}).max_tokens == 6
    assert DIALECTS["anthropic"].parse_request({"max_tokens": 7}).max_tokens == 7
    ollama = DIALECTS["ollama"].parse_request({"options": {"num_predict": 8}})
    assert (ollama.max_tokens, ollama.stream) == (8, True)
    assert DIALECTS["openai"].parse_request({}).stream is False
    chat = DIALECTS["openai"].parse_request({"stream_options": {"include_usage": True}})
    assert chat.include_usage is True
    assert isinstance(chat, RequestParams)


def test_body_controls_apply_like_headers_and_a_header_wins() -> None:
    body = {"model": "m", "promptpath": {"pause-after": 3, "pause-s": "8", "rate": 20.5}}
    got, sources = from_request(DEFAULTS, {"x-promptpath-rate": "5"}, body)
    assert (got.pause_after, got.pause_s, got.rate) == (3, 8.0, 5.0)
    assert sources == {"pause-after": "body", "pause-s": "body", "rate": "header"}


def test_body_null_switches_a_control_off_and_lists_repeat_response_headers() -> None:
    defaults = dataclasses.replace(DEFAULTS, error_after=2)
    body = {"promptpath": {"error-after": None, "response-header": ["A: 1", "B: 2"]}}
    got, _ = from_request(defaults, {}, body)
    assert got.error_after is None
    assert got.response_headers == (("a", "1"), ("b", "2"))


def test_every_control_travels_in_the_body() -> None:
    """Generic over CONTROLS: a control added there needs nothing else to ride the body."""
    for control in CONTROLS:
        value = {
            "body": "json",
            "accel-buffering": "no",
            "status": "200",
            "ignore-disconnect": "yes",
            "prefix-cache": "yes",
            "probe-id": "p1",
            "close-code": "1011",
            "cdn": "fastly:AMS",
        }.get(control, "1")
        via_header = from_headers(Behaviour(), {f"x-promptpath-{control}": value})
        via_body, sources = from_request(Behaviour(), {}, {"promptpath": {control: value}})
        assert via_body == via_header, control
        assert sources == {control: "body"}


@pytest.mark.parametrize(
    ("body", "name"),
    [
        ({"promptpath": "pause-s=8"}, "promptpath"),
        ({"promptpath": {"pause-sec": 8}}, "promptpath.pause-sec"),
        ({"promptpath": {"rate": True}}, "promptpath.rate"),
        ({"promptpath": {"rate": "fast"}}, "promptpath.rate"),
    ],
)
def test_bad_body_controls_name_the_body_field(body: dict[str, object], name: str) -> None:
    with pytest.raises(BehaviourError) as caught:
        from_request(DEFAULTS, {}, body)
    assert caught.value.header == name


def test_no_body_field_leaves_the_behaviour_alone() -> None:
    assert from_request(DEFAULTS, {}, {"model": "m"}) == (DEFAULTS, {})
    assert from_request(DEFAULTS, {}, ["not", "an", "object"]) == (DEFAULTS, {})


def test_the_applied_report_names_every_control_and_its_source() -> None:
    got, sources = from_request(
        DEFAULTS, {"x-promptpath-tokens": "6"}, {"promptpath": {"pause-s": 2}}
    )
    report = applied(got, sources)
    assert set(report["controls"]) == set(CONTROLS)  # type: ignore[arg-type]
    assert report["controls"]["tokens"] == 6  # type: ignore[index]
    assert report["controls"]["pause-after"] is None  # type: ignore[index]
    assert report["controls_from"] == {"pause-s": "body", "tokens": "header"}


def test_the_report_rides_on_the_first_json_event_only() -> None:
    event = Event({"x": 1})
    first = json.loads(frame(event, sse=False, seq=0, sent_unix_ns=5, report={"request_id": "r"}))
    later = json.loads(frame(event, sse=False, seq=1, sent_unix_ns=6))
    assert first["promptpath"] == {"seq": 0, "sent_unix_ns": 5, "request_id": "r"}
    assert later["promptpath"] == {"seq": 1, "sent_unix_ns": 6}
