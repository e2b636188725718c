"""Dialect decoders: which events are tokens, which are bookkeeping, end, error, usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptpath.core.errors import StreamError
from promptpath.core.exitcodes import ExitCode
from promptpath.core.timeline import StreamEvent, Usage
from promptpath.dialects.anthropic import AnthropicDecoder
from promptpath.dialects.ollama import OllamaDecoder
from promptpath.dialects.openai import OpenAIChatDecoder
from promptpath.dialects.plugins import decoder_for
from promptpath.dialects.responses import ResponsesDecoder
from promptpath.options import Provider
from promptpath.streams.dialect_base import MalformedEvent
from promptpath.streams.ndjson import NDJSONDecoder, NDJSONLine
from promptpath.streams.sse import SSEDecoder, SSEMessage

STREAMS = Path(__file__).resolve().parent.parent / "data" / "streams"


def sse(data: str, event: str = "message", t_ns: int = 7) -> SSEMessage:
    return SSEMessage(event=event, data=data, id=None, retry=None, t_ns=t_ns)


def comment(text: str) -> SSEMessage:
    return SSEMessage(event="", data=text, id=None, retry=None, t_ns=7, comment=True)


def chat(delta: dict[str, object], **top: object) -> SSEMessage:
    choice = {"index": 0, "delta": delta, "finish_reason": top.pop("finish_reason", None)}
    return sse(json.dumps({"object": "chat.completion.chunk", "choices": [choice], **top}))


def decode_file(name: str, provider: Provider) -> list[StreamEvent]:
    dialect = decoder_for(provider)
    framer = SSEDecoder() if dialect.framing == "sse" else NDJSONDecoder()
    frames = [*framer.feed((STREAMS / name).read_bytes(), 1), *framer.close(2)]
    return [e for f in frames for e in dialect.decode(f, read_index=0)]


def shape(events: list[StreamEvent]) -> list[tuple[str, str | None, str]]:
    return [(e.kind, e.content_type, e.text) for e in events]


def content(events: list[StreamEvent]) -> list[tuple[str | None, str]]:
    return [(e.content_type, e.text) for e in events if e.kind == "content"]


# -- framing and protocol --------------------------------------------------------------
@pytest.mark.parametrize(
    ("provider", "cls", "framing"),
    [
        ("openai", OpenAIChatDecoder, "sse"),
        ("responses", ResponsesDecoder, "sse"),
        ("anthropic", AnthropicDecoder, "sse"),
        ("ollama", OllamaDecoder, "ndjson"),
    ],
)
def test_decoder_for_each_provider(provider: Provider, cls: type, framing: str) -> None:
    d = decoder_for(provider)
    assert isinstance(d, cls) and d.framing == framing


def test_decoder_for_unknown_provider_is_an_error() -> None:
    with pytest.raises(ValueError, match="cohere-v9"):
        decoder_for("cohere-v9")  # type: ignore[arg-type]


def test_events_carry_frame_stamp_and_read_index() -> None:
    [e] = OpenAIChatDecoder().decode(chat({"content": "x"}), read_index=4)
    assert (e.t_ns, e.read_index) == (7, 4)


# -- OpenAI chat -----------------------------------------------------------------------
def test_openai_role_only_first_chunk_is_meta_not_a_token() -> None:
    [e] = OpenAIChatDecoder().decode(chat({"role": "assistant", "content": "", "refusal": None}))
    assert (e.kind, e.name) == ("meta", "chat.completion.chunk")


def test_openai_content_reasoning_and_tool_deltas_are_tokens() -> None:
    d = OpenAIChatDecoder()
    assert content(d.decode(chat({"content": "BGP"}))) == [("text", "BGP")]
    assert content(d.decode(chat({"reasoning_content": "hm"}))) == [("reasoning", "hm")]
    assert content(d.decode(chat({"reasoning": "hm", "content": None}))) == [("reasoning", "hm")]
    start = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "f", "arguments": ""},
    }
    assert content(d.decode(chat({"tool_calls": [start]}))) == [("tool", "")]
    args = {"index": 0, "function": {"arguments": '{"a"'}}
    assert content(d.decode(chat({"tool_calls": [args]}))) == [("tool", '{"a"')]


def test_openai_empty_tool_argument_delta_is_not_a_token() -> None:
    [e] = OpenAIChatDecoder().decode(
        chat({"tool_calls": [{"index": 0, "function": {"arguments": ""}}]})
    )
    assert e.kind == "meta"


def test_openai_finish_reason_chunk_is_meta_naming_the_reason() -> None:
    [e] = OpenAIChatDecoder().decode(chat({}, finish_reason="length"))
    assert (e.kind, e.text) == ("meta", "finish_reason=length")


def test_openai_usage_chunk_with_empty_choices() -> None:
    data = {
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {
            "prompt_tokens": 18,
            "completion_tokens": 9,
            "total_tokens": 27,
            "completion_tokens_details": {"reasoning_tokens": 3},
        },
    }
    [e] = OpenAIChatDecoder().decode(sse(json.dumps(data)))
    assert e.kind == "meta"
    assert e.usage == Usage(input_tokens=18, output_tokens=9, reasoning_tokens=3)


def test_openai_usage_alongside_content_rides_on_the_content_event() -> None:
    msg = chat({"content": "x"}, usage={"prompt_tokens": 1, "completion_tokens": 2})
    [e] = OpenAIChatDecoder().decode(msg)
    assert e.kind == "content" and e.usage == Usage(input_tokens=1, output_tokens=2)


def test_openai_null_usage_is_no_usage() -> None:
    [e] = OpenAIChatDecoder().decode(chat({"content": "x"}, usage=None))
    assert e.usage is None


@pytest.mark.parametrize("data", ["[DONE]", " [DONE] "])
def test_openai_done_is_the_end_marker(data: str) -> None:
    [e] = OpenAIChatDecoder().decode(sse(data))
    assert (e.kind, e.name) == ("end", "[DONE]")


def test_openai_error_object_in_a_200_stream() -> None:
    data = {"error": {"message": "The server had an error", "type": "server_error", "code": None}}
    [e] = OpenAIChatDecoder().decode(sse(json.dumps(data)))
    assert (e.kind, e.error) == ("error", "server_error: The server had an error")


def test_openai_sse_error_event_without_error_key() -> None:
    [e] = OpenAIChatDecoder().decode(sse('{"message": "upstream timed out"}', event="error"))
    assert (e.kind, e.error) == ("error", "upstream timed out")


def test_openai_recorded_stream() -> None:
    events = decode_file("openai_chat.sse", "openai")
    assert events[0].kind == "meta"  # role-only chunk
    assert "".join(t for _, t in content(events)) == (
        "BGP sessions flap when hold timers expire — réseau 🙂."
    )
    assert [e.kind for e in events[-3:]] == ["meta", "meta", "end"]
    assert events[-3].text == "finish_reason=stop"
    # The recording's prompt_tokens_details.cached_tokens is 0: read as such.
    assert events[-2].usage == Usage(
        input_tokens=18, output_tokens=9, reasoning_tokens=0, cached_input_tokens=0
    )


def test_openai_recorded_tool_stream() -> None:
    events = decode_file("openai_chat_tools.sse", "openai")
    assert content(events) == [
        ("tool", ""),
        ("tool", '{"'),
        ("tool", "router"),
        ("tool", '":"edge-1"}'),
    ]
    assert shape(events)[-3:] == [
        ("meta", None, ""),
        ("meta", None, "finish_reason=tool_calls"),
        ("end", None, ""),
    ]


def test_openai_recorded_reasoning_stream_with_comments() -> None:
    events = decode_file("openai_chat_reasoning.sse", "openai")
    assert [e.kind for e in events].count("comment") == 2
    assert events[0].text == "OPENROUTER PROCESSING"
    assert content(events) == [
        ("reasoning", "The user asks"),
        ("reasoning", " about BGP."),
        ("reasoning", "Check timers."),
        ("text", "Check the hold timer."),
    ]
    usage_events = [e for e in events if e.usage]
    assert [(e.text, e.usage) for e in usage_events] == [
        ("finish_reason=stop", Usage(input_tokens=12, output_tokens=40, reasoning_tokens=31))
    ]


def test_openai_recorded_error_stream() -> None:
    events = decode_file("openai_chat_error.sse", "openai")
    assert [e.kind for e in events] == ["meta", "content", "error"]
    assert events[-1].error is not None and events[-1].error.startswith("server_error: ")


def test_openai_recorded_malformed_stream_raises() -> None:
    with pytest.raises(MalformedEvent) as info:
        decode_file("openai_chat_malformed.sse", "openai")
    assert "<html><head><title>502 Bad Gateway" in info.value.message


# -- malformed data, any dialect -------------------------------------------------------
@pytest.mark.parametrize("provider", ["openai", "responses", "anthropic", "ollama"])
@pytest.mark.parametrize("data", ["{not json", "", "[1, 2]", '"text"', "42", "null"])
def test_non_object_data_raises_malformed_event(provider: Provider, data: str) -> None:
    d = decoder_for(provider)
    frame = sse(data) if d.framing == "sse" else NDJSONLine(data, 7)
    with pytest.raises(MalformedEvent) as info:
        d.decode(frame)
    exc = info.value
    assert isinstance(exc, StreamError) and exc.exit_code == ExitCode.STREAM
    assert (exc.stage, exc.kind) == ("stream", "malformed_event")


def test_malformed_event_quotes_at_most_80_characters() -> None:
    bad = "<html>" + "x" * 500
    with pytest.raises(MalformedEvent) as info:
        OpenAIChatDecoder().decode(sse(bad))
    assert bad[:80] in info.value.message
    assert bad[:81] not in info.value.message
    assert info.value.detail["excerpt"] == bad[:80]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ('{"a": "unterminated', "not JSON: Unterminated string starting at column 7"),
        ('{"a": 1,}', "not JSON: Expecting property name enclosed in double quotes at column 9"),
        ('{"a":1}\n{"b":2}', "not JSON: Extra data at line 2 column 1"),  # two data lines
        ("[" * 100_000, "JSON nested too deeply to parse"),
        # A ValueError, not a JSONDecodeError: it escaped as an internal error (exit 70).
        ('{"usage": {"completion_tokens": ' + "9" * 5000 + "}}", "a JSON integer too long to read"),
    ],
)
def test_malformed_json_message_says_where_the_parser_stopped(data: str, reason: str) -> None:
    with pytest.raises(MalformedEvent) as info:
        OpenAIChatDecoder().decode(sse(data))
    assert info.value.message.startswith(f"malformed stream event ({reason}): ")
    assert len(info.value.detail["excerpt"]) <= 80  # type: ignore[arg-type]


def test_malformed_event_far_into_the_data_quotes_80_characters_around_the_error() -> None:
    bad = '{"choices": [' + "1," * 200 + "]}"  # the parser stops at the "]"
    where = bad.index(",]") + 1
    with pytest.raises(MalformedEvent) as info:
        OpenAIChatDecoder().decode(sse(bad))
    exc = info.value
    assert f"Expecting value at column {where + 1}" in exc.message
    excerpt = exc.detail["excerpt"]
    assert isinstance(excerpt, str) and len(excerpt) == 80 and excerpt.endswith(",]}")
    assert exc.message.endswith(f": …{excerpt!r}") and exc.detail["position"] == where


# -- reference endpoint fields ---------------------------------------------------------
def test_promptpath_seq_and_send_time_are_copied() -> None:
    msg = chat({"content": "x"}, promptpath={"seq": 3, "sent_unix_ns": 1736942415250000000})
    [e] = OpenAIChatDecoder().decode(msg)
    assert (e.seq, e.server_sent_unix_ns) == (3, 1736942415250000000)


def test_promptpath_field_of_wrong_type_is_ignored() -> None:
    [e] = OpenAIChatDecoder().decode(chat({"content": "x"}, promptpath={"seq": "3"}))
    assert (e.seq, e.server_sent_unix_ns) == (None, None)


def test_keepalive_comment_carries_seq_and_send_time() -> None:
    [e] = AnthropicDecoder().decode(comment("keepalive seq=3 sent_unix_ns=123"))
    assert (e.kind, e.text, e.seq, e.server_sent_unix_ns) == (
        "comment",
        "keepalive seq=3 sent_unix_ns=123",
        3,
        123,
    )
    [plain] = ResponsesDecoder().decode(comment("ping"))
    assert (plain.kind, plain.seq, plain.server_sent_unix_ns) == ("comment", None, None)


def test_recorded_reference_stream() -> None:
    events = decode_file("reference_openai.sse", "openai")
    assert [(e.kind, e.seq) for e in events] == [
        ("comment", 0),
        ("meta", 1),
        ("content", 2),
        ("comment", 3),
        ("content", 4),
        ("meta", 5),
        ("end", None),
    ]
    assert events[2].server_sent_unix_ns == 1736942415250000000
    assert events[5].usage == Usage(input_tokens=8, output_tokens=2)


# -- OpenAI Responses ------------------------------------------------------------------
def test_responses_recorded_stream() -> None:
    events = decode_file("responses.sse", "responses")
    assert content(events) == [
        ("reasoning", "**Considering BGP timers**"),
        ("text", "Hold"),
        ("text", " timers"),
        ("text", " expire."),
    ]
    assert all(e.kind == "meta" for e in events[:4])  # created, in_progress, item/part added
    end = events[-1]
    assert (end.kind, end.name) == ("end", "response.completed")
    # input_tokens_details.cached_tokens 0 in the recording.
    assert end.usage == Usage(
        input_tokens=19, output_tokens=42, reasoning_tokens=28, cached_input_tokens=0
    )


def test_responses_tool_call_and_incomplete_end() -> None:
    events = decode_file("responses_tools.sse", "responses")
    assert content(events) == [("tool", ""), ("tool", '{"router":'), ("tool", '"edge-1"}')]
    end = events[-1]
    assert (end.kind, end.name, end.text) == (
        "end",
        "response.incomplete",
        "reason=max_output_tokens",
    )
    assert end.usage == Usage(input_tokens=40, output_tokens=16, reasoning_tokens=0)


def test_responses_failed_and_error_events() -> None:
    failed = decode_file("responses_failed.sse", "responses")[-1]
    assert (failed.kind, failed.error) == (
        "error",
        "server_error: The model failed to generate a response.",
    )
    err = decode_file("responses_error.sse", "responses")[-1]
    assert err.kind == "error" and err.error is not None
    assert err.error.startswith("rate_limit_exceeded: Rate limit reached")


def test_responses_type_falls_back_to_sse_event_name() -> None:
    [e] = ResponsesDecoder().decode(sse('{"delta": "hi"}', event="response.output_text.delta"))
    assert (e.kind, e.content_type, e.text) == ("content", "text", "hi")


def test_responses_empty_delta_is_not_a_token() -> None:
    [e] = ResponsesDecoder().decode(sse('{"type": "response.output_text.delta", "delta": ""}'))
    assert e.kind == "meta"


# -- Anthropic -------------------------------------------------------------------------
def test_anthropic_recorded_stream() -> None:
    events = decode_file("anthropic.sse", "anthropic")
    assert [e.name for e in events[:3]] == ["message_start", "content_block_start", "ping"]
    assert [e.kind for e in events[:3]] == ["meta", "meta", "meta"]
    # message_start's cache_creation_input_tokens and cache_read_input_tokens: 0 each,
    # counted apart from input_tokens (Anthropic's usage).
    assert events[0].usage == Usage(
        input_tokens=472, cached_input_tokens=0, cache_write_input_tokens=0, cached_apart=True
    )
    assert content(events) == [
        ("reasoning", "The user asks why BGP flaps."),
        ("reasoning", " Hold timers, MTU, CPU."),
        ("text", "Let me check"),
        ("text", " the neighbour — état 🙂."),
        ("tool", ""),  # content_block_start of tool_use: the call starts
        ("tool", '{"router": '),
        ("tool", '"edge-1"}'),
    ]
    signature = next(e for e in events if e.name == "content_block_delta" and e.kind == "meta")
    assert signature.text == ""  # the signature_delta
    delta = next(e for e in events if e.name == "message_delta")
    assert (delta.kind, delta.text, delta.usage) == (
        "meta",
        "stop_reason=tool_use",
        Usage(output_tokens=89, cached_apart=True),
    )
    assert (events[-1].kind, events[-1].name) == ("end", "message_stop")


def test_anthropic_empty_input_json_delta_is_not_a_token() -> None:
    data = json.dumps(
        {
            "type": "content_block_delta",
            "index": 2,
            "delta": {"type": "input_json_delta", "partial_json": ""},
        }
    )
    [e] = AnthropicDecoder().decode(sse(data, event="content_block_delta"))
    assert e.kind == "meta"


def test_anthropic_overloaded_error_mid_stream() -> None:
    events = decode_file("anthropic_overloaded.sse", "anthropic")
    assert [e.kind for e in events] == ["meta", "meta", "meta", "content", "error"]
    assert events[-1].error == "overloaded_error: Overloaded"


# -- Ollama ----------------------------------------------------------------------------
def test_ollama_recorded_stream_with_unterminated_done_line() -> None:
    events = decode_file("ollama_chat.ndjson", "ollama")
    assert "".join(t for _, t in content(events)) == "BGP sessions flap — réseau 🙂."
    end = events[-1]
    assert (end.kind, end.name, end.text) == ("end", "done", "done_reason=stop")
    assert end.usage == Usage(input_tokens=26, output_tokens=4)


def test_ollama_thinking_and_tool_calls() -> None:
    events = decode_file("ollama_thinking_tools.ndjson", "ollama")
    assert content(events) == [
        ("reasoning", "The user wants"),
        ("reasoning", " neighbour state."),
        ("tool", '{"router": "edge-1"}'),
    ]
    assert events[-1].usage == Usage(input_tokens=120, output_tokens=31)


def test_ollama_error_line() -> None:
    [e] = decode_file("ollama_error.ndjson", "ollama")
    assert (e.kind, e.error) == ("error", 'model "llama9" not found, try pulling it first')


def test_ollama_empty_content_line_is_meta() -> None:
    line = NDJSONLine('{"message": {"role": "assistant", "content": ""}, "done": false}', 1)
    [e] = OllamaDecoder().decode(line)
    assert e.kind == "meta"


def test_ollama_generate_api_response_field() -> None:
    [e] = OllamaDecoder().decode(NDJSONLine('{"response": "hi", "done": false}', 1))
    assert (e.kind, e.content_type, e.text) == ("content", "text", "hi")


# -- robustness ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "data",
    [
        '{"choices": "nope"}',
        '{"choices": [null, 3, {"delta": []}]}',
        '{"choices": [{"delta": {"content": 5, "tool_calls": [null, {"function": 1}]}}]}',
        '{"usage": {"prompt_tokens": true, "completion_tokens": "9"}}',
    ],
)
def test_openai_odd_shapes_are_meta_not_crashes(data: str) -> None:
    [e] = OpenAIChatDecoder().decode(sse(data))
    assert e.kind == "meta" and e.usage is None


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("0", Usage(output_tokens=0)),
        ("1000000000", Usage(output_tokens=10**9)),  # MAX_TOKEN_COUNT itself
        ("7.0", Usage(output_tokens=7)),  # a float with no fraction is a count
        ("1000000001", Usage(untrusted=("output_tokens",))),
        ("-5", Usage(untrusted=("output_tokens",))),
        ("2.5", Usage(untrusted=("output_tokens",))),
        ("1e308", Usage(untrusted=("output_tokens",))),
        ("Infinity", Usage(untrusted=("output_tokens",))),
        ("NaN", Usage(untrusted=("output_tokens",))),
        ("1" + "0" * 400, Usage(untrusted=("output_tokens",))),
        ('"5"', None),  # not a number: no count at all, as before
        ("true", None),
        ("null", None),
    ],
)
def test_a_usage_count_is_kept_only_when_a_request_can_have_it(
    value: str, want: Usage | None
) -> None:
    chunk = '{"choices":[],"usage":{"completion_tokens":' + value + "}}"
    [event] = OpenAIChatDecoder().decode(sse(chunk))
    assert event.usage == want
