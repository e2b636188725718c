"""Gemini/Vertex and Azure OpenAI decoders: tokens, reasoning, tools, usage, end, errors.

The streams in tests/data/streams (gemini*.sse, azure_chat.sse) were written by hand in
the shapes the APIs document and google-genai 3.6.1 / openai 3.57.0 parse (CRLF event
separators as the Gemini API sends them); they are not captures of the live services.
"""

from __future__ import annotations

import json

import pytest

from promptpath.core.timeline import FILTER_EVENTS, Usage
from promptpath.dialects.gemini import GeminiDecoder
from promptpath.dialects.openai import OpenAIChatDecoder
from promptpath.dialects.plugins import decoder_for
from promptpath.dialects.stream import StreamDecoder
from promptpath.streams.sse import SSEMessage
from tests.unit.test_dialects import content, decode_file


def sse(obj: object) -> SSEMessage:
    return SSEMessage(event="message", data=json.dumps(obj), id=None, retry=None, t_ns=7)


def test_gemini_and_vertex_share_the_decoder_azure_the_openai_one() -> None:
    assert isinstance(decoder_for("gemini"), GeminiDecoder)
    assert isinstance(decoder_for("vertex"), GeminiDecoder)
    assert isinstance(decoder_for("azure"), OpenAIChatDecoder)


def test_gemini_thought_parts_are_reasoning_text_parts_are_text() -> None:
    events = decode_file("gemini.sse", "gemini")
    assert content(events) == [
        ("reasoning", "**Considering hold timers**\n\nThe user asks about BGP flaps."),
        ("text", "A flapping BGP session usually means keepalives"),
        ("text", " are lost: check the hold timer and the MTU."),
    ]


def test_gemini_end_is_the_finish_reason_with_the_complete_usage() -> None:
    events = decode_file("gemini.sse", "gemini")
    assert events[-1].kind == "end"
    assert events[-1].text == "finishReason=STOP"
    # candidatesTokenCount (17) excludes thoughtsTokenCount (100): output is their sum.
    assert events[-1].usage == Usage(input_tokens=9, output_tokens=117, reasoning_tokens=100)
    assert [e.kind for e in events].count("end") == 1


def test_gemini_function_call_is_a_tool_event_and_a_signature_alone_is_nothing() -> None:
    events = decode_file("gemini_tools.sse", "gemini")
    assert content(events) == [("tool", '{"device": "r1"}')]
    assert events[-1].kind == "end"


def test_gemini_error_object_mid_stream_is_an_error_event_naming_the_status() -> None:
    events = decode_file("gemini_error.sse", "gemini")
    assert [e.kind for e in events] == ["content", "error"]
    assert events[-1].error == "UNAVAILABLE (503): The model is overloaded. Please try again later."


def test_a_blocked_prompt_ends_the_stream_with_its_block_reason() -> None:
    events = decode_file("gemini_blocked.sse", "vertex")
    assert [(e.kind, e.text) for e in events] == [("end", "blockReason=PROHIBITED_CONTENT")]


def test_a_gemini_stream_without_finish_reason_has_no_end() -> None:
    raw = (
        b'data: {"candidates": [{"content": {"parts": [{"text": "A"}], "role": "model"}}]}\r\n\r\n'
    )
    d = StreamDecoder("gemini")
    events = d.feed(raw, 1, 0) + d.close(2)
    assert [e.kind for e in events] == ["content"]
    assert not d.ended and not d.terminal


def test_gemini_fields_of_the_wrong_type_are_absent_not_a_crash() -> None:
    odd = {"candidates": [{"content": {"parts": "x"}}, 3, {"finishReason": 7}], "usageMetadata": []}
    assert [e.kind for e in GeminiDecoder().decode(sse(odd))] == ["meta"]


def test_azure_filter_chunks_are_named_counted_and_never_tokens() -> None:
    events = decode_file("azure_chat.sse", "azure")
    assert content(events) == [("text", "BGP"), ("text", " flaps")]
    names = [e.name for e in events if e.name in FILTER_EVENTS]
    assert names == ["prompt_filter_results", "content_filter_results"]
    assert all(e.kind == "meta" for e in events if e.name in FILTER_EVENTS)
    assert not any(e.kind == "error" for e in events)
    assert events[-1].kind == "end"


@pytest.mark.parametrize(
    "choice",
    [
        # The finish chunk carries an empty content_filter_results too: it is the finish.
        {"content_filter_results": {}, "delta": {}, "finish_reason": "stop", "index": 0},
        {"delta": {}, "finish_reason": None, "index": 0},  # a plain empty chunk
    ],
)
def test_chunks_that_are_not_filter_verdicts_are_not_counted_as_such(
    choice: dict[str, object],
) -> None:
    [event] = OpenAIChatDecoder().decode(sse({"choices": [choice]}))
    assert event.name not in FILTER_EVENTS


def test_the_role_chunk_with_an_empty_verdict_is_not_a_filter_event() -> None:
    role = {"content_filter_results": {}, "delta": {"role": "assistant", "content": ""}}
    [event] = OpenAIChatDecoder().decode(sse({"choices": [{**role, "index": 0}]}))
    assert event.name not in FILTER_EVENTS
