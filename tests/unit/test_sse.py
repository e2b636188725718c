"""WHATWG event-stream parsing: line endings, fields, comments, splits, EOF."""

from __future__ import annotations

import re
import time
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptpath.streams.framing import MAX_LINE_BYTES, FrameTooLarge
from promptpath.streams.sse import SSEDecoder, SSEMessage

STREAMS = Path(__file__).resolve().parent.parent / "data" / "streams"
SSE_FILES = sorted(STREAMS.glob("*.sse"))

Key = tuple[str, str, str | None, int | None, bool]


def key(m: SSEMessage) -> Key:
    """A message without its stamp: what must not depend on how bytes were split."""
    return (m.event, m.data, m.id, m.retry, m.comment)


def parse_whole(raw: bytes, t_ns: int = 0) -> list[SSEMessage]:
    d = SSEDecoder()
    out = d.feed(raw, t_ns)
    out += d.close(t_ns)
    return out


def parse_chunks(raw: bytes, cuts: list[int]) -> list[SSEMessage]:
    """Feed ``raw`` split at ``cuts``; chunk i is stamped i."""
    d = SSEDecoder()
    out: list[SSEMessage] = []
    bounds = [0, *sorted(cuts), len(raw)]
    for i, (a, b) in enumerate(pairwise(bounds)):
        out += d.feed(raw[a:b], i)
    out += d.close(len(bounds))
    assert d.bytes_seen == len(raw)
    return out


def with_eol(raw: bytes, eol: bytes) -> bytes:
    return raw.replace(b"\n", eol)


# -- a deliberately naive second implementation of the spec, for differential tests ----
def reference_parse(raw: bytes) -> list[Key]:
    text = raw.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = re.split(r"\r\n|\r|\n", text)
    lines.pop()  # the unterminated remainder (maybe "") is never a complete line
    out: list[Key] = []
    data: list[str] = []
    event = ""
    id_buffer: str | None = None
    last_id: str | None = None
    retry: int | None = None
    for line in lines:
        if line == "":
            last_id = id_buffer
            if data:
                out.append((event or "message", "\n".join(data), last_id, retry, False))
            data, event = [], ""
        elif line.startswith(":"):
            body = line[1:]
            out.append(("", body[1:] if body.startswith(" ") else body, last_id, retry, True))
        else:
            name, _, value = line.partition(":")
            if ":" in line and value.startswith(" "):
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
            elif name == "id" and "\0" not in value:
                id_buffer = value
            elif name == "retry" and value and all(c in "0123456789" for c in value):
                retry = int(value)
    return out


# -- line endings ----------------------------------------------------------------------
@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_every_line_ending_gives_the_same_messages(eol: bytes) -> None:
    raw = b"event: a\ndata: one\ndata: two\n\n: ka\ndata: three\n\n"
    msgs = parse_whole(with_eol(raw, eol))
    assert [key(m) for m in msgs] == [
        ("a", "one\ntwo", None, None, False),
        ("", "ka", None, None, True),
        ("message", "three", None, None, False),
    ]


def test_mixed_line_endings_in_one_stream() -> None:
    msgs = parse_whole(b"data: a\r\n\rdata: b\n\r\ndata: c\r\r")
    assert [m.data for m in msgs] == ["a", "b", "c"]


def test_crlf_split_across_feeds_is_one_line_break() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: a\r", 1) == []
    # The CR already ended "data: a"; this LF must not count as the blank line.
    assert d.feed(b"\n", 2) == []
    [msg] = d.feed(b"\r\n", 3)
    assert (msg.data, msg.t_ns) == ("a", 3)


def test_cr_at_end_of_feed_completes_the_event_at_once() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: a\r", 1) == []
    [msg] = d.feed(b"\r", 2)
    assert msg.t_ns == 2
    # A following LF belongs to the CR just seen, not a new (empty) line.
    assert d.feed(b"\ndata: b\n\n", 3)[0].data == "b"


def test_lone_cr_then_lf_in_later_feed_after_other_bytes_is_two_breaks() -> None:
    d = SSEDecoder()
    d.feed(b"data: a\r", 1)
    assert d.feed(b"x\n", 2) == []  # "x" is a field line (ignored), not a blank line
    assert [m.data for m in d.feed(b"\n", 3)] == ["a"]


# -- fields ----------------------------------------------------------------------------
def test_one_optional_space_after_colon_is_removed() -> None:
    msgs = parse_whole(b"data:no space\n\ndata: one\n\ndata:  two\n\n")
    assert [m.data for m in msgs] == ["no space", "one", " two"]


def test_line_without_colon_is_field_with_empty_value() -> None:
    # "data" alone appends an empty line: the spec dispatches data == "".
    msgs = parse_whole(b"data\n\ndata\ndata\n\n")
    assert [m.data for m in msgs] == ["", "\n"]


def test_empty_data_value_still_dispatches_but_no_data_field_does_not() -> None:
    msgs = parse_whole(b"data:\n\nevent: x\n\nid: 3\n\n")
    assert [key(m) for m in msgs] == [("message", "", None, None, False)]


def test_event_type_resets_after_each_dispatch() -> None:
    msgs = parse_whole(b"event: ping\ndata: 1\n\ndata: 2\n\nevent: x\n\ndata: 3\n\n")
    assert [(m.event, m.data) for m in msgs] == [("ping", "1"), ("message", "2"), ("message", "3")]


def test_colon_in_value_is_kept() -> None:
    [msg] = parse_whole(b'data: {"a": "b:c"}\n\n')
    assert msg.data == '{"a": "b:c"}'


def test_field_names_are_case_sensitive_and_unknown_fields_ignored() -> None:
    msgs = parse_whole(b"Data: x\nfoo: bar\ndata : y\ndata: z\n\n")
    assert [key(m) for m in msgs] == [("message", "z", None, None, False)]


def test_id_persists_as_last_event_id_and_nul_id_is_ignored() -> None:
    raw = b"id: 7\ndata: a\n\ndata: b\n\nid: 8\x009\ndata: c\n\nid\ndata: d\n\n"
    msgs = parse_whole(raw)
    assert [(m.data, m.id) for m in msgs] == [("a", "7"), ("b", "7"), ("c", "7"), ("d", "")]


def test_id_takes_effect_only_at_dispatch() -> None:
    d = SSEDecoder()
    [c1] = d.feed(b"id: 1\n: before\n", 1)
    assert c1.comment and c1.id is None
    d.feed(b"data: x\n\n", 2)
    assert d.last_event_id == "1"


@pytest.mark.parametrize(
    ("line", "expected"),
    [(b"retry: 1500", 1500), (b"retry: 15x", None), (b"retry: -1", None),
     (b"retry:", None), (b"retry: 1.5", None), (b"retry: \xc2\xb2", None)],
)  # fmt: skip
def test_retry_accepts_only_ascii_digits(line: bytes, expected: int | None) -> None:
    [msg] = parse_whole(line + b"\ndata: x\n\n")
    assert msg.retry == expected


def test_retry_without_data_sets_reconnection_time_for_later_events() -> None:
    msgs = parse_whole(b"retry: 3000\n\ndata: x\n\n")
    assert [(m.data, m.retry) for m in msgs] == [("x", 3000)]


# -- comments --------------------------------------------------------------------------
def test_comment_is_emitted_when_its_line_completes_without_disturbing_the_event() -> None:
    d = SSEDecoder()
    assert d.feed(b"data: a\n: keepalive", 1) == []
    [c] = d.feed(b"\n", 2)
    assert (c.comment, c.data, c.event, c.t_ns) == (True, "keepalive", "", 2)
    [m] = d.feed(b"data: b\n\n", 3)
    assert m.data == "a\nb"


@pytest.mark.parametrize(
    ("raw", "text"), [(b":\n", ""), (b": \n", ""), (b":  two\n", " two"), (b":x: y\n", "x: y")]
)
def test_comment_text_drops_colon_and_one_space(raw: bytes, text: str) -> None:
    [c] = parse_whole(raw)
    assert c.comment and c.data == text


# -- encoding --------------------------------------------------------------------------
def test_leading_bom_is_stripped_once() -> None:
    [m] = parse_whole(b"\xef\xbb\xbfdata: x\n\n")
    assert m.data == "x"
    # A second BOM is part of the first line, which is then not a "data" field.
    assert parse_whole(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n") == []


def test_bom_split_across_feeds_is_stripped() -> None:
    raw = b"\xef\xbb\xbfdata: x\n\n"
    for cut in range(1, 4):
        assert [m.data for m in parse_chunks(raw, [cut])] == ["x"]


def test_bom_only_at_stream_start() -> None:
    [m] = parse_whole(b"data: \xef\xbb\xbfx\n\n")
    assert m.data == "\ufeffx"


def test_utf8_character_split_across_feeds() -> None:
    raw = "data: é🙂ü\n\n".encode()
    for cut in range(len(raw) + 1):
        assert [m.data for m in parse_chunks(raw, [cut])] == ["é🙂ü"]


def test_invalid_utf8_becomes_replacement_character() -> None:
    [m] = parse_whole(b"data: a\xffb\n\n")
    assert m.data == "a\ufffdb"


# -- EOF -------------------------------------------------------------------------------
def test_unterminated_last_event_is_discarded_and_reported_pending() -> None:
    d = SSEDecoder()
    [m] = d.feed(b"data: a\n\ndata: b\n", 1)
    assert m.data == "a"
    assert d.pending
    assert d.close(2) == []
    assert d.pending


def test_partial_line_at_eof_is_pending() -> None:
    d = SSEDecoder()
    d.feed(b"data: a\n\ndat", 1)
    assert d.close(2) == [] and d.pending


def test_truncated_multibyte_character_at_eof_is_pending() -> None:
    d = SSEDecoder()
    d.feed(b"data: a\n\n\xc3", 1)
    assert d.pending
    assert d.close(2) == [] and d.pending


def test_clean_end_is_not_pending() -> None:
    d = SSEDecoder()
    d.feed(b"data: a\n\n: bye\n", 1)
    assert d.close(2) == [] and not d.pending


def test_feed_after_close_is_an_error() -> None:
    d = SSEDecoder()
    d.close(1)
    with pytest.raises(RuntimeError):
        d.feed(b"data: x\n\n", 2)


def test_message_is_stamped_with_the_feed_that_completed_it() -> None:
    raw = b"data: a\n\n: c\ndata: b\r\n\r\n"
    d = SSEDecoder()
    stamps = [(m.data, m.t_ns) for i in range(len(raw)) for m in d.feed(raw[i : i + 1], i)]
    # "a" completes on its second LF; the comment on its LF; "b" on the CR of the blank line.
    assert stamps == [("a", 8), ("c", 12), ("b", 22)]


# -- every split of every recorded stream ----------------------------------------------
@pytest.mark.parametrize("path", SSE_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_recorded_stream_gives_same_messages_at_every_split(path: Path, eol: bytes) -> None:
    raw = with_eol(path.read_bytes(), eol)
    whole = [key(m) for m in parse_whole(raw)]
    assert whole == reference_parse(raw)
    assert whole, "recorded stream decoded to nothing"
    for cut in range(len(raw) + 1):
        assert [key(m) for m in parse_chunks(raw, [cut])] == whole, f"split at {cut}"
    assert [key(m) for m in parse_chunks(raw, list(range(1, len(raw))))] == whole


_PIECES = st.sampled_from(
    ["data", "data:", "data: ", "event:", "event: x", "id:", "id: 1", "id: \0", "retry:",
     "retry: 10", "retry: 1a", ":", ": ka", "x", " ", "é", "🙂", "\ufeff", "\r", "\n",
     "\r\n", "\n\n", "{}", "foo:bar"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(_PIECES, max_size=40),
    bom=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_random_streams_match_reference_parser_at_random_splits(
    pieces: list[str], bom: bool, cuts: list[int]
) -> None:
    raw = ("\ufeff" if bom else "").encode() + "".join(pieces).encode()
    cuts = [c for c in cuts if c <= len(raw)]
    assert [key(m) for m in parse_chunks(raw, cuts)] == reference_parse(raw)


def test_one_megabyte_in_one_byte_feeds_is_linear() -> None:
    raw = b"data: " + b"x" * (1 << 20) + b"\n\n"
    d = SSEDecoder()
    started = time.perf_counter()
    out: list[SSEMessage] = []
    for i in range(len(raw)):
        out += d.feed(raw[i : i + 1], i)
    elapsed = time.perf_counter() - started
    assert [len(m.data) for m in out] == [1 << 20]
    # Linear is ~1-2 s here; quadratic joining would take minutes.
    assert elapsed < 20, f"{elapsed:.1f} s for 1 MB in 1-byte feeds"


# -- the line cap ----------------------------------------------------------------------
CAP = 64


def feed_capped(raw: bytes, cuts: list[int]) -> tuple[list[Key], FrameTooLarge | None]:
    """Feed ``raw`` split at ``cuts`` to a decoder capped at ``CAP``; keys and the error."""
    d = SSEDecoder(max_line=CAP)
    out: list[SSEMessage] = []
    bounds = [0, *sorted(cuts), len(raw)]
    for i, (a, b) in enumerate(pairwise(bounds)):
        try:
            out += d.feed(raw[a:b], i)
        except FrameTooLarge as exc:
            out += exc.frames  # type: ignore[arg-type]
            with pytest.raises(RuntimeError):  # the decoder is closed now
                d.feed(b"data: more\n\n", i + 1)
            assert d.pending, "the dropped line is accounted for by no message"
            return [key(m) for m in out], exc
    return [key(m) for m in out], None


@pytest.mark.parametrize(
    ("line", "what"),
    [
        (b"data: " + b"x" * (CAP - 5), "line"),  # CAP + 1 characters
        (b": " + "é".encode() * (CAP - 1), "line"),  # a comment is a line too
        # lines well under the cap whose joined data is CAP + 1: 31 + LF + 31 + LF + 1
        (b"data: " + b"x" * 31 + b"\ndata: " + b"y" * 31 + b"\ndata: z", "event data"),
    ],
    ids=["field", "comment", "data-lines"],
)
@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_over_the_cap_raises_at_every_split_keeping_earlier_messages(
    line: bytes, what: str, eol: bytes
) -> None:
    raw = with_eol(b"data: ok\n\n" + line + b"\n\n", eol)
    ok: list[Key] = [("message", "ok", None, None, False)]
    for cuts in ([], *([c] for c in range(len(raw) + 1)), list(range(1, len(raw)))):
        got, exc = feed_capped(raw, cuts)
        assert exc is not None, f"no error at {cuts}"
        assert got == ok and exc.what == what, f"split at {cuts}"
        assert str(exc) == f"{what} longer than {CAP} bytes"
        # the start of the line, or of the event's data (what a dialect would have seen)
        assert exc.head.startswith(line[:10].decode() if what == "line" else "x" * 10)


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_a_line_of_exactly_the_cap_passes_at_every_split(eol: bytes) -> None:
    raw = with_eol(b"data: " + b"x" * (CAP - 6) + b"\n\n", eol)
    for cut in range(len(raw) + 1):
        assert feed_capped(raw, [cut]) == ([("message", "x" * (CAP - 6), None, None, False)], None)


def test_an_endless_line_is_refused_after_the_cap_not_buffered() -> None:
    d = SSEDecoder()  # the default cap
    chunk = b"x" * (64 << 10)
    fed = 0
    with pytest.raises(FrameTooLarge, match="line longer than"):
        for _ in range(10_000):  # 640 MB if nothing stopped it
            d.feed(chunk, fed)
            fed += len(chunk)
    assert MAX_LINE_BYTES < fed + len(chunk) <= MAX_LINE_BYTES + len(chunk)


# -- raw JSON objects outside data: lines (Gemini's plain error, streams/google.py) ----
PLAIN = (
    b'data: {"a": 1}\r\n\r\n'
    b"{\n"
    b'  "error": {\n'
    b"\n"  # a blank line inside: skipped, as google-genai skips it
    b'    "message": "a } and a \\" and a {",\n'
    b'    "code": 503\n'
    b"  }\n"
    b"}\n"
    b": ping\n"
)
PLAIN_JSON = '{\n  "error": {\n    "message": "a } and a \\" and a {",\n    "code": 503\n  }\n}'


def test_a_json_object_outside_data_lines_is_one_message_at_every_split() -> None:
    for cut in range(len(PLAIN) + 1):
        d = SSEDecoder(raw_json=True)
        out = d.feed(PLAIN[:cut], 1) + d.feed(PLAIN[cut:], 2) + d.close(3)
        assert [(m.data, m.raw_json, m.comment) for m in out] == [
            ('{"a": 1}', False, False),
            (PLAIN_JSON, True, False),
            ("ping", False, True),
        ], cut
        # Stamped with the feed that carried its closing brace.
        assert out[1].t_ns == (1 if cut >= PLAIN.index(b"}\n: ping") + 2 else 2)
        assert not d.pending


def test_without_raw_json_the_lines_are_ignored_fields_as_the_spec_says() -> None:
    assert [m.data for m in parse_whole(PLAIN)] == ['{"a": 1}', "ping"]


def test_an_unfinished_raw_object_is_pending_and_a_stray_brace_ends_one() -> None:
    d = SSEDecoder(raw_json=True)
    assert d.feed(b'{\n  "error": {\n', 1) == [] and d.pending
    d = SSEDecoder(raw_json=True)
    assert [m.data for m in d.feed(b"{}}\n", 1)] == ["{}}"]  # parsed (and refused) later
    assert not d.pending


def test_a_raw_object_past_the_cap_is_too_large() -> None:
    d = SSEDecoder(raw_json=True, max_line=100)
    with pytest.raises(FrameTooLarge, match="event data"):
        d.feed(b"{\n" + b'"x": 1,\n' * 20, 1)
