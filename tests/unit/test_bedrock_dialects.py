"""Bedrock's two streams in dialect terms, fed as event-stream bytes through StreamDecoder.

The messages are built by the reference endpoint's own writer (the plug-ins' emulations,
dialects/bedrock.py and bedrock_invoke.py), which boto3 reads
(tests/integration/test_bedrock_sdk.py): what is decoded here is what the SDK receives.
"""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptpath.core.errors import StreamError
from promptpath.core.timeline import StreamEvent
from promptpath.dialects.bedrock.emulation import EXCEPTIONS, BedrockConverse
from promptpath.dialects.bedrock_invoke.emulation import BedrockInvoke
from promptpath.dialects.registry import Provider
from promptpath.dialects.stream import StreamDecoder
from promptpath.server.dialect import Dialect, RequestInfo, RequestParams
from promptpath.streams.eventstream import encode_message


def info(error_type: str | None = None) -> RequestInfo:
    params = RequestParams(stream=True, model="m", max_tokens=None, prompt_tokens=5)
    return RequestInfo(
        id="abc", created_unix=0, created_iso="", params=params, error_type=error_type
    )


def wire(dialect: Dialect, tokens: list[str], *, error: bool = False, end: bool = True) -> bytes:
    events = dialect.opening() + [dialect.token(t) for t in tokens]
    if error:
        events += dialect.error()
    elif end:
        events += dialect.closing("stop", len(tokens), 412_000_000)
    return b"".join(dialect.encode(e, seq=i, sent_unix_ns=1_000 + i) for i, e in enumerate(events))


def decode(provider: Provider, data: bytes, cuts: list[int] = ()) -> list[StreamEvent]:  # type: ignore[assignment]
    dec = StreamDecoder(provider)
    out: list[StreamEvent] = []
    at = 0
    for i, cut in enumerate([*cuts, len(data)]):
        out += dec.feed(data[at:cut], i, i)
        at = cut
    return out + dec.close(99)


CONVERSE = wire(BedrockConverse(info()), ["Hel", "lo", " there"])
INVOKE = wire(BedrockInvoke(info()), ["Hel", "lo", " there"])


@pytest.mark.parametrize(("provider", "data"), [("bedrock", CONVERSE), ("bedrock-invoke", INVOKE)])
def test_tokens_usage_end_and_the_servers_time(provider: Provider, data: bytes) -> None:
    events = decode(provider, data)
    content = [e for e in events if e.kind == "content"]
    assert [e.text for e in content] == ["Hel", "lo", " there"]
    assert all(e.content_type == "text" for e in content)
    ends = [e for e in events if e.kind == "end"]
    assert len(ends) == 1 and ends[0] is events[-1]
    usage = [e.usage for e in events if e.usage is not None and e.usage.output_tokens]
    assert usage[-1].output_tokens == 3 and usage[-1].input_tokens == 5
    assert events[-1].server_ms == 412.0
    # The reference endpoint's send stamps ride inside (the native JSON, for invoke).
    assert [e.seq for e in content] == sorted(e.seq for e in content if e.seq is not None)


@given(st.lists(st.integers(min_value=0, max_value=len(CONVERSE)), max_size=5))
@settings(max_examples=100, deadline=None)
def test_converse_at_every_split_point(cuts: list[int]) -> None:
    whole = [(e.kind, e.name, e.text) for e in decode("bedrock", CONVERSE)]
    assert [(e.kind, e.name, e.text) for e in decode("bedrock", CONVERSE, sorted(cuts))] == whole


@given(st.lists(st.integers(min_value=0, max_value=len(INVOKE)), max_size=5))
@settings(max_examples=100, deadline=None)
def test_invoke_at_every_split_point(cuts: list[int]) -> None:
    whole = [(e.kind, e.name, e.text) for e in decode("bedrock-invoke", INVOKE)]
    got = decode("bedrock-invoke", INVOKE, sorted(cuts))
    assert [(e.kind, e.name, e.text) for e in got] == whole


def test_message_stop_without_metadata_is_no_end() -> None:
    dialect = BedrockConverse(info())
    closing = dialect.closing("stop", 1, 0)[:-1]  # contentBlockStop, messageStop
    data = wire(dialect, ["a"], end=False) + b"".join(
        dialect.encode(e, seq=9, sent_unix_ns=0) for e in closing
    )
    assert not any(e.kind == "end" for e in decode("bedrock", data))


def test_metadata_without_message_stop_is_no_end_either() -> None:
    dialect = BedrockConverse(info())
    metadata = dialect.closing("stop", 1, 0)[-1]
    data = wire(dialect, ["a"], end=False) + dialect.encode(metadata, seq=9, sent_unix_ns=0)
    events = decode("bedrock", data)
    assert not any(e.kind == "end" for e in events)
    assert events[-1].usage is not None  # the usage is still read


@pytest.mark.parametrize("name", sorted(EXCEPTIONS))
@pytest.mark.parametrize(
    ("provider", "dialect_cls"), [("bedrock", BedrockConverse), ("bedrock-invoke", BedrockInvoke)]
)
def test_each_exception_is_an_in_band_error_after_the_tokens(
    provider: Provider, dialect_cls: type[Dialect], name: str
) -> None:
    events = decode(provider, wire(dialect_cls(info(name)), ["a", "b"], error=True))
    assert [e.kind for e in events if e.kind in ("content", "error")] == ["content"] * 2 + ["error"]
    error = events[-1]
    assert error.name == name
    assert error.error is not None and error.error.startswith(f"{name}: ")


def test_an_error_message_type_names_its_code() -> None:
    raw = encode_message(
        [(":message-type", "error"), (":error-code", "InternalFailure"), (":error-message", "x")],
        b"",
    )
    (event,) = decode("bedrock", raw)
    assert (event.kind, event.error) == ("error", "InternalFailure: x")


def message(event_type: str, payload: object) -> bytes:
    return encode_message(
        [(":event-type", event_type), (":message-type", "event")], json.dumps(payload).encode()
    )


def test_reasoning_and_tool_deltas_are_their_own_content_types() -> None:
    data = b"".join(
        [
            message("contentBlockDelta", {"delta": {"reasoningContent": {"text": "hmm"}}}),
            message("contentBlockDelta", {"delta": {"reasoningContent": {"signature": "s"}}}),
            message("contentBlockStart", {"start": {"toolUse": {"toolUseId": "t", "name": "f"}}}),
            message("contentBlockDelta", {"delta": {"toolUse": {"input": '{"a":'}}}),
            message("contentBlockDelta", {"delta": {"text": "hi"}}),
        ]
    )
    kinds = [(e.kind, e.content_type, e.text) for e in decode("bedrock", data)]
    assert kinds == [
        ("content", "reasoning", "hmm"),
        ("meta", None, ""),
        ("content", "tool", ""),
        ("content", "tool", '{"a":'),
        ("content", "text", "hi"),
    ]


def test_an_invoke_chunk_that_is_not_base64_is_malformed() -> None:
    with pytest.raises(StreamError) as err:
        decode("bedrock-invoke", message("chunk", {"bytes": "not base64!"}))
    assert err.value.kind == "malformed_event"


def test_another_models_payload_ends_at_its_invocation_metrics() -> None:
    # Llama on invoke-with-response-stream: no Anthropic "type"; Bedrock's metrics on the
    # last chunk are the end.
    def chunk(obj: object) -> bytes:
        return message("chunk", {"bytes": base64.b64encode(json.dumps(obj).encode()).decode()})

    data = chunk({"generation": "Hi"}) + chunk(
        {
            "generation": "",
            "stop_reason": "stop",
            "amazon-bedrock-invocationMetrics": {
                "inputTokenCount": 3,
                "outputTokenCount": 1,
                "invocationLatency": 250,
            },
        }
    )
    events = decode("bedrock-invoke", data)
    assert events[-1].kind == "end" and events[-1].server_ms == 250.0
    assert events[-1].usage is not None and events[-1].usage.output_tokens == 1


def test_a_corrupt_frame_keeps_the_events_before_it() -> None:
    bad = bytearray(CONVERSE)
    bad[-10] ^= 0xFF  # inside the last message (metadata)
    with pytest.raises(StreamError) as err:
        decode("bedrock", bytes(bad))
    assert err.value.kind == "bad_frame"
    kept = err.value.events  # type: ignore[attr-defined]
    assert [e.text for e in kept if e.kind == "content"] == ["Hel", "lo", " there"]
