"""The ingest stays bounded whatever a read carries: decoding in steps, a cap on the
events kept, a budget for their text, and counters for the rest."""

from __future__ import annotations

import zlib

import pytest

from promptpath.core.analysis import compute, headline
from promptpath.core.errors import StreamError, TraceTimeout
from promptpath.core.timeline import ErrorInfo, NotKept, Read, Timeline
from promptpath.tracer import ingest
from promptpath.tracer.ingest import DECODE_STEP, BodyIngest

EVENT = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'


def _timeline(encoding: str | None = None) -> Timeline:
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    tl.status = 200
    tl.response_headers = [("content-type", "text/event-stream")]
    if encoding is not None:
        tl.response_headers.append(("content-encoding", encoding))
    return tl


def _drain(ing: BodyIngest) -> int:
    steps = 0
    while ing.backlog:
        ing.resume()
        steps += 1
    return steps


def test_a_compressed_read_decodes_in_steps_of_at_most_decode_step() -> None:
    events = EVENT * 50_000  # 2.35 MB of events
    wire = zlib.compress(events, 9, wbits=31)
    assert len(wire) < 64 * 1024  # one read's worth
    tl = _timeline("gzip")
    ing = BodyIngest(tl, "openai")
    ing.feed(wire, 5, 0)
    assert tl.decoded_bytes <= DECODE_STEP  # the feed itself decoded one step only
    assert ing.backlog and tl.decoding
    steps = _drain(ing)
    assert steps >= len(events) // DECODE_STEP - 1
    assert tl.decoded_bytes == len(events)
    assert ing.tokens == 50_000 and not tl.decoding


def test_an_uncompressed_piece_larger_than_a_step_is_split_too() -> None:
    tl = _timeline()
    ing = BodyIngest(tl, "openai")
    ing.feed(EVENT * 5000, 5, 0)  # 235 KB in one piece (HTTP/2 and QUIC hand over more)
    assert tl.decoded_bytes == DECODE_STEP
    _drain(ing)
    assert len(tl.events) == 5000 and tl.decoded_bytes == len(EVENT) * 5000


def test_events_past_the_cap_are_counted_not_kept_and_still_count_as_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ingest, "MAX_KEPT_EVENTS", 100)
    tl = _timeline()
    ing = BodyIngest(tl, "openai")
    for i in range(3):
        ing.feed(EVENT * 100, 1_000_000 * (i + 1), i)
        _drain(ing)
    ing.feed(b"data: [DONE]\n\n", 9_000_000, 3)
    assert len(tl.events) == 101  # the cap, and the terminal marker past it
    assert tl.events[-1].kind == "end" and tl.stream_end == "marker"
    assert tl.not_kept == NotKept(events=200, content=200, text_chars=200)
    assert tl.milestones["last_token"] == 3_000_000  # from the events not kept as well
    tokens = compute(tl).tokens
    assert tokens.count == tokens.events == 300 and tokens.all_events == 301
    # The rate spans every token: first kept to the last one counted.
    assert tokens.mean_itl_ms == pytest.approx(2.0 / 299)


def test_event_text_is_kept_within_one_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest, "MAX_KEPT_TEXT", 10)
    tl = _timeline()
    ing = BodyIngest(tl, "openai")
    ing.feed(b'data: {"choices":[{"delta":{"content":"abcdefgh"}}]}\n\n' * 3, 1, 0)
    assert [e.text for e in tl.events] == ["abcdefgh", "ab", ""]
    assert tl.not_kept == NotKept(events=0, content=0, text_chars=14)
    assert compute(tl).tokens.count == 3


def test_a_timeout_while_decoding_is_not_reported_as_a_silence() -> None:
    tl = _timeline("gzip")
    tl.milestones.update(request_sent=1_000_000, ttfb=2_000_000)
    ing = BodyIngest(tl, "openai")
    ing.feed(zlib.compress(EVENT * 50_000, 9, wbits=31), 3_000_000, 0)
    ing.resume()  # the deadline comes with most of the read still to decode
    exc = TraceTimeout("timed out", stage="stream", kind="timeout", timeout_s=10.0)
    tl.error = ErrorInfo.from_error(exc, 10_000_000_000)
    line = headline(tl, compute(tl))
    assert "still decoding at the 10 s deadline" in line and "compression bomb" in line
    assert "no byte" not in line
    assert compute(tl).tokens.stall_ms is None


def test_a_token_stamped_after_the_deadline_leaves_no_negative_silence() -> None:
    tl = _timeline()
    tl.milestones.update(request_sent=1_000_000, ttfb=2_000_000)
    ing = BodyIngest(tl, "openai")
    ing.feed(EVENT, 3_000_000, 0)
    ing.feed(EVENT, 10_050_000_000, 1)  # the loop reached the cancellation 50 ms late
    tl.reads.extend([Read(3_000_000, 47), Read(10_050_000_000, 47)])
    exc = TraceTimeout("timed out", stage="stream", kind="timeout", timeout_s=10.0)
    tl.error = ErrorInfo.from_error(exc, 10_000_000_000)
    assert compute(tl).tokens.stall_ms == 0.0
    line = headline(tl, compute(tl))
    assert "the last 0.00 s before the end" in line, line  # was "the last -0.05 s"


def test_an_error_body_nested_too_deep_to_parse_is_quoted_as_text() -> None:
    # json.loads raised RecursionError on it: a 500 with this body was exit 70.
    assert ingest.error_message(b"[" * 60_000).startswith("[[[[")
    assert ingest.error_message(b'{"error": ' + b"9" * 5000 + b"}").startswith('{"error": 99')


def test_the_first_error_event_past_the_cap_is_kept_and_quoted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Usage events fill the room past the cap first; the error after them is still kept:
    # finish() quotes it (it looked it up in the kept events, and found none: exit 70).
    monkeypatch.setattr(ingest, "MAX_KEPT_EVENTS", 10)
    monkeypatch.setattr(ingest, "MAX_NOTABLE_EXTRA", 2)
    usage = b'data: {"choices":[],"usage":{"completion_tokens":5}}\n\n'
    error = b'data: {"error":{"message":"overloaded","type":"overloaded_error"}}\n\n'
    tl = _timeline()
    ing = BodyIngest(tl, "openai")
    ing.feed(EVENT * 10 + usage * 5 + error * 2, 1, 0)
    assert [e.kind for e in tl.events[10:]] == ["meta", "meta", "error"]
    assert tl.not_kept.events == 4  # three usage events and the second error
    with pytest.raises(StreamError, match="overloaded_error: overloaded"):
        ing.finish(2)


@pytest.mark.parametrize("cut", [0, 1, 2, 9])
def test_a_gzip_stream_of_several_members_is_decoded_whole_wherever_a_read_cuts_it(
    cut: int,
) -> None:
    # RFC 1952 §2.2: a gzip stream is a series of members (a hop may flush one per event).
    # Checked by hand before the fix: the second member's three tokens were dropped.
    first = zlib.compress(EVENT * 2, 6, wbits=31)
    second = zlib.compress(EVENT * 3 + b"data: [DONE]\n\n", 6, wbits=31)
    tl = _timeline("gzip")
    ing = BodyIngest(tl, "openai")
    ing.feed(first + second[:cut], 5, 0)
    _drain(ing)
    ing.feed(second[cut:], 6, 1)
    _drain(ing)
    assert ing.tokens == 5 and tl.stream_end == "marker"


def test_a_later_member_is_decoded_in_steps_too() -> None:
    bomb = zlib.compress(EVENT * 50_000, 9, wbits=31)
    tl = _timeline("gzip")
    ing = BodyIngest(tl, "openai")
    ing.feed(zlib.compress(EVENT, 6, wbits=31) + bomb, 5, 0)
    while ing.backlog:
        before = tl.decoded_bytes
        ing.resume()
        assert tl.decoded_bytes - before <= DECODE_STEP
    assert ing.tokens == 50_001


@pytest.mark.parametrize(("encoding", "wbits"), [("gzip", 31), ("deflate", 15)])
def test_bytes_after_the_stream_that_are_no_member_are_left_unread(
    encoding: str, wbits: int
) -> None:
    tl = _timeline(encoding)
    ing = BodyIngest(tl, "openai")
    ing.feed(zlib.compress(EVENT * 2, 6, wbits=wbits) + b"\x00\x00 trailing", 5, 0)
    _drain(ing)
    ing.feed(zlib.compress(EVENT, 6, wbits=31), 6, 1)  # after deflate's end: not read
    _drain(ing)
    assert ing.tokens == 2
