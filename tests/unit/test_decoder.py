"""StreamDecoder: framing + dialect, stamps from the completing read, splits, EOF."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptpath.core.exitcodes import ExitCode
from promptpath.core.timeline import StreamEvent
from promptpath.dialects.stream import StreamDecoder
from promptpath.options import Provider
from promptpath.streams.dialect_base import MalformedEvent
from promptpath.streams.framing import MAX_LINE_BYTES

STREAMS = Path(__file__).resolve().parent.parent / "data" / "streams"

#: Every recorded stream that decodes cleanly, with its dialect.
RECORDED: list[tuple[str, Provider]] = [
    ("openai_chat.sse", "openai"),
    ("openai_chat_tools.sse", "openai"),
    ("openai_chat_reasoning.sse", "openai"),
    ("openai_chat_error.sse", "openai"),
    ("openai_chat_truncated.sse", "openai"),
    ("reference_openai.sse", "openai"),
    ("responses.sse", "responses"),
    ("responses_tools.sse", "responses"),
    ("responses_failed.sse", "responses"),
    ("responses_error.sse", "responses"),
    ("anthropic.sse", "anthropic"),
    ("anthropic_overloaded.sse", "anthropic"),
    ("ollama_chat.ndjson", "ollama"),
    ("ollama_thinking_tools.ndjson", "ollama"),
    ("ollama_error.ndjson", "ollama"),
    ("gemini.sse", "gemini"),
    ("gemini_tools.sse", "gemini"),
    ("gemini_error.sse", "gemini"),
    ("gemini_error_plain.sse", "gemini"),
    ("gemini_blocked.sse", "vertex"),
    ("azure_chat.sse", "azure"),
    ("cohere.sse", "cohere"),
    ("cohere_tools.sse", "cohere"),
    ("cohere_error.sse", "cohere"),
]


def run(provider: Provider, raw: bytes, cuts: list[int]) -> tuple[list[StreamEvent], bool]:
    """Feed ``raw`` split at ``cuts`` (read i stamped 1000 + i); return events and pending."""
    d = StreamDecoder(provider)
    events: list[StreamEvent] = []
    bounds = [0, *sorted(set(cuts)), len(raw)]
    for i, (a, b) in enumerate(pairwise(bounds)):
        events += d.feed(raw[a:b], 1000 + i, i)
    events += d.close(99_999)
    assert d.bytes_seen == len(raw)
    return events, d.pending


def unstamped(events: list[StreamEvent]) -> list[StreamEvent]:
    return [replace(e, t_ns=0, read_index=-1) for e in events]


def test_recorded_streams_cover_every_file() -> None:
    files = {p.name for p in STREAMS.iterdir()} - {"openai_chat_malformed.sse"}
    assert files == {name for name, _ in RECORDED}


@pytest.mark.parametrize(("name", "provider"), RECORDED, ids=[n for n, _ in RECORDED])
def test_recorded_stream_decodes_identically_at_every_split(name: str, provider: Provider) -> None:
    raw = (STREAMS / name).read_bytes()
    whole, pending = run(provider, raw, [])
    assert whole
    expected = unstamped(whole)
    for cut in range(len(raw) + 1):
        events, p = run(provider, raw, [cut])
        assert unstamped(events) == expected, f"split at {cut}"
        assert p == pending
    one_byte, p = run(provider, raw, list(range(1, len(raw))))
    assert unstamped(one_byte) == expected and p == pending


@settings(max_examples=40, deadline=None)
@given(
    case=st.sampled_from(RECORDED),
    cuts=st.lists(st.integers(min_value=0, max_value=3000), max_size=30),
)
def test_recorded_streams_survive_random_multi_splits(
    case: tuple[str, Provider], cuts: list[int]
) -> None:
    name, provider = case
    raw = (STREAMS / name).read_bytes()
    cuts = [c for c in cuts if c <= len(raw)]
    assert unstamped(run(provider, raw, cuts)[0]) == unstamped(run(provider, raw, [])[0])


def test_events_are_stamped_with_the_read_that_completed_them() -> None:
    raw = (STREAMS / "openai_chat.sse").read_bytes()
    boundary = raw.index(b"\n\n") + 1  # between the two LFs ending the role chunk
    d = StreamDecoder("openai")
    assert d.feed(raw[:boundary], 500, 3) == []
    events = d.feed(raw[boundary:], 600, 4)
    assert [(e.t_ns, e.read_index) for e in events] == [(600, 4)] * len(events)


def test_one_byte_reads_stamp_each_event_at_its_final_byte() -> None:
    raw = b"data: [DONE]\n\n"
    d = StreamDecoder("openai")
    got = [(e.kind, e.t_ns, e.read_index) for i in range(len(raw))
           for e in d.feed(raw[i : i + 1], 10 * i, i)]  # fmt: skip
    assert got == [("end", 130, 13)]


def test_openai_done_marks_ended_and_clean_close() -> None:
    events, pending = run("openai", (STREAMS / "openai_chat.sse").read_bytes(), [])
    assert events[-1].kind == "end" and not pending


def test_truncated_sse_stream_is_pending_and_not_ended() -> None:
    d = StreamDecoder("openai")
    events = d.feed((STREAMS / "openai_chat_truncated.sse").read_bytes(), 1, 0)
    assert [e.kind for e in events] == ["meta", "content"]
    assert d.close(2) == []
    assert d.pending and not d.ended


def test_ended_after_terminal_marker() -> None:
    d = StreamDecoder("anthropic")
    d.feed((STREAMS / "anthropic.sse").read_bytes(), 1, 0)
    assert d.ended


def test_ollama_last_line_without_lf_keeps_its_read_stamp_at_close() -> None:
    raw = (STREAMS / "ollama_chat.ndjson").read_bytes()
    split = raw.rindex(b"\n") + 10  # inside the last, unterminated line
    d = StreamDecoder("ollama")
    d.feed(raw[:split], 100, 5)
    assert d.feed(raw[split:], 200, 6) == []
    assert d.feed(b"", 250, 7) == []  # an empty read carries nothing
    [end] = d.close(300)
    assert (end.kind, end.t_ns, end.read_index) == ("end", 200, 6)
    assert d.ended and not d.pending


def test_ollama_body_cut_mid_line_is_pending_not_malformed() -> None:
    d = StreamDecoder("ollama")
    [e] = d.feed(b'{"message":{"content":"a"},"done":false}\n{"message":{"cont', 1, 0)
    assert e.kind == "content"
    assert d.close(2) == []
    assert d.pending and not d.ended


def test_malformed_event_is_reraised_with_the_events_before_it() -> None:
    raw = (STREAMS / "openai_chat_malformed.sse").read_bytes()
    d = StreamDecoder("openai")
    with pytest.raises(MalformedEvent) as info:
        d.feed(raw, 1, 0)
    assert [(e.kind, e.text) for e in info.value.events] == [("content", "BGP")]
    assert (info.value.stage, info.value.kind) == ("stream", "malformed_event")


@pytest.mark.parametrize(
    ("provider", "good", "endless"),
    [
        ("openai", b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n', b'data: {"x":"'),
        ("ollama", b'{"message":{"content":"a"},"done":false}\n', b'{"message":"'),
    ],
)
def test_a_line_over_the_cap_is_a_malformed_event_after_the_events_before_it(
    provider: Provider, good: bytes, endless: bytes
) -> None:
    d = StreamDecoder(provider)  # the default cap: reads of 64 KiB, as a transport does
    chunk = b"y" * (64 << 10)
    fed = 0
    with pytest.raises(MalformedEvent) as info:
        d.feed(good + endless + chunk, 1, 0)
        for i in range(1, 10_000):  # 640 MB if nothing stopped it
            fed += len(chunk)
            d.feed(chunk, 1 + i, i)
    assert fed <= MAX_LINE_BYTES, "the line was buffered past the cap"
    exc = info.value
    assert (exc.stage, exc.kind, exc.exit_code) == ("stream", "malformed_event", ExitCode.STREAM)
    assert f"line longer than {MAX_LINE_BYTES} bytes" in exc.message
    assert exc.detail["excerpt"] == (endless + chunk).decode()[:80]
    assert exc.events == []  # "a" was returned by the first read
    assert d.pending and not d.ended


def test_the_events_before_an_oversized_line_in_the_same_read_are_kept() -> None:
    d = StreamDecoder("openai", max_line=100)
    raw = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\n' + b"data: " + b"z" * 100
    with pytest.raises(MalformedEvent) as info:
        d.feed(raw, 5, 2)
    assert [(e.kind, e.text, e.read_index) for e in info.value.events] == [("content", "a", 2)]
    assert "line longer than 100 bytes" in info.value.message


@pytest.mark.parametrize(("name", "provider"), RECORDED, ids=[n for n, _ in RECORDED])
def test_terminal_turns_true_with_the_read_that_decodes_the_end_marker_or_an_error_event(
    name: str, provider: Provider
) -> None:
    raw = (STREAMS / name).read_bytes()
    d = StreamDecoder(provider)
    last_word = False
    for i in range(len(raw)):
        events = d.feed(raw[i : i + 1], i, i)
        last_word = last_word or any(e.kind in ("end", "error") for e in events)
        assert d.terminal == last_word, f"after byte {i}"
    last_word = last_word or any(e.kind in ("end", "error") for e in d.close(len(raw)))
    assert d.terminal == last_word
    assert d.terminal == (name != "openai_chat_truncated.sse")


@pytest.mark.parametrize(
    ("name", "provider"),
    [
        ("openai_chat_error.sse", "openai"),
        ("responses_failed.sse", "responses"),
        ("responses_error.sse", "responses"),
        ("anthropic_overloaded.sse", "anthropic"),
        ("ollama_error.ndjson", "ollama"),
        ("gemini_error.sse", "gemini"),
        ("gemini_error_plain.sse", "gemini"),
    ],
)
def test_an_error_event_is_terminal_while_the_body_is_still_open(
    name: str, provider: Provider
) -> None:
    d = StreamDecoder(provider)
    events = d.feed((STREAMS / name).read_bytes(), 1, 0)  # no close(): the body stays open
    assert events[-1].kind == "error"
    assert d.terminal and not d.ended


def test_terminal_holds_when_a_later_event_in_the_same_read_is_malformed() -> None:
    d = StreamDecoder("openai")
    raw = b'data: {"error":{"message":"boom"}}\n\ndata: <html>\n\n'
    with pytest.raises(MalformedEvent) as info:
        d.feed(raw, 1, 0)
    assert [e.kind for e in info.value.events] == ["error"]
    assert d.terminal


def test_framing_follows_provider() -> None:
    assert StreamDecoder("ollama").framing == "ndjson"
    assert StreamDecoder("responses").framing == "sse"
