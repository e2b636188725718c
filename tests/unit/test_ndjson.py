"""NDJSON framing: LF/CRLF lines, blank lines, the unterminated last line, splits."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from promptpath.streams.framing import MAX_LINE_BYTES, FrameTooLarge
from promptpath.streams.ndjson import NDJSONDecoder, NDJSONLine

STREAMS = Path(__file__).resolve().parent.parent / "data" / "streams"
NDJSON_FILES = sorted(STREAMS.glob("*.ndjson"))


def parse_chunks(raw: bytes, cuts: list[int]) -> list[NDJSONLine]:
    d = NDJSONDecoder()
    out: list[NDJSONLine] = []
    bounds = [0, *sorted(cuts), len(raw)]
    for i, (a, b) in enumerate(pairwise(bounds)):
        out += d.feed(raw[a:b], i)
    out += d.close(len(bounds))
    assert d.bytes_seen == len(raw)
    return out


def test_lf_and_crlf_terminated_lines() -> None:
    d = NDJSONDecoder()
    out = d.feed(b'{"a":1}\n{"b":2}\r\n{"c"', 5)
    assert out == [NDJSONLine('{"a":1}', 5), NDJSONLine('{"b":2}', 5)]
    assert d.pending
    assert d.feed(b":3}\n", 6) == [NDJSONLine('{"c":3}', 6)]
    assert not d.pending


def test_blank_and_whitespace_lines_are_skipped() -> None:
    d = NDJSONDecoder()
    assert [x.text for x in d.feed(b'\n\r\n  \n{"a":1}\n\n', 1)] == ['{"a":1}']


def test_unterminated_last_line_is_returned_on_close_with_its_arrival_stamp() -> None:
    d = NDJSONDecoder()
    assert d.feed(b'{"done":', 10) == []
    assert d.feed(b"true}", 20) == []
    assert d.pending
    # The bytes arrived at 20; the EOF at 99 must not move the event.
    assert d.close(99) == [NDJSONLine('{"done":true}', 20)]
    assert not d.pending


def test_close_after_clean_end_returns_nothing() -> None:
    d = NDJSONDecoder()
    d.feed(b'{"a":1}\n  ', 1)
    assert not d.pending
    assert d.close(2) == []
    assert d.close(3) == []


def test_utf8_split_across_feeds() -> None:
    raw = '{"t":"é🙂"}\n'.encode()
    for cut in range(len(raw) + 1):
        assert [x.text for x in parse_chunks(raw, [cut])] == ['{"t":"é🙂"}']


def test_leading_bom_is_stripped() -> None:
    assert [x.text for x in parse_chunks(b'\xef\xbb\xbf{"a":1}\n', [2])] == ['{"a":1}']


def test_lone_cr_does_not_end_a_line() -> None:
    assert [x.text for x in parse_chunks(b'{"a":\r1}\n', [])] == ['{"a":\r1}']


def test_feed_after_close_is_an_error() -> None:
    d = NDJSONDecoder()
    d.close(1)
    with pytest.raises(RuntimeError):
        d.feed(b"{}\n", 2)


@pytest.mark.parametrize("path", NDJSON_FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("crlf", [False, True], ids=["LF", "CRLF"])
def test_recorded_stream_gives_same_lines_at_every_split(path: Path, crlf: bool) -> None:
    raw = path.read_bytes()
    if crlf:
        raw = raw.replace(b"\n", b"\r\n")
    whole = [x.text for x in parse_chunks(raw, [])]
    assert whole == [s for s in raw.decode().replace("\r\n", "\n").split("\n") if s.strip()]
    for cut in range(len(raw) + 1):
        assert [x.text for x in parse_chunks(raw, [cut])] == whole, f"split at {cut}"
    assert [x.text for x in parse_chunks(raw, list(range(1, len(raw))))] == whole


def test_one_megabyte_line_in_one_byte_feeds() -> None:
    raw = b'{"t":"' + b"x" * (1 << 20) + b'"}'
    d = NDJSONDecoder()
    for i in range(len(raw)):
        assert d.feed(raw[i : i + 1], i) == []
    [line] = d.close(len(raw))
    assert len(line.text) == len(raw) and line.t_ns == len(raw) - 1


# -- the line cap ----------------------------------------------------------------------
CAP = 64


def feed_capped(raw: bytes, cuts: list[int]) -> tuple[list[str], FrameTooLarge | None]:
    """Feed ``raw`` split at ``cuts``, then close, capped at ``CAP``; lines and the error."""
    d = NDJSONDecoder(max_line=CAP)
    out: list[NDJSONLine] = []
    bounds = [0, *sorted(cuts), len(raw)]
    for i, (a, b) in enumerate(pairwise(bounds)):
        try:
            out += d.feed(raw[a:b], i)
        except FrameTooLarge as exc:
            out += exc.frames  # type: ignore[arg-type]
            with pytest.raises(RuntimeError):  # the decoder is closed now
                d.feed(b"{}\n", i + 1)
            assert d.pending and d.close(i + 1) == []
            return [x.text for x in out], exc
    out += d.close(len(bounds))
    return [x.text for x in out], None


@pytest.mark.parametrize(
    "tail",
    [
        b'{"t":"' + b"x" * (CAP - 7) + b'"}\n',  # CAP + 1 bytes before the LF
        b'{"t":"' + b"x" * (CAP - 8) + b'"}\r\n',  # CAP bytes and the CR of a CRLF
        b'{"t":"' + "é".encode() * CAP,  # never ends: refused before close() is reached
    ],
    ids=["LF", "CRLF", "unterminated"],
)
def test_over_the_cap_raises_at_every_split_keeping_earlier_lines(tail: bytes) -> None:
    raw = b'{"a":1}\n' + tail
    for cuts in ([], *([c] for c in range(len(raw) + 1)), list(range(1, len(raw)))):
        got, exc = feed_capped(raw, cuts)
        assert exc is not None, f"no error at {cuts}"
        assert got == ['{"a":1}'], f"split at {cuts}"
        assert str(exc) == f"line longer than {CAP} bytes" and exc.head.startswith('{"t":"')


@pytest.mark.parametrize("eol", [b"\n", b""], ids=["LF", "at-close"])
def test_a_line_of_exactly_the_cap_passes_at_every_split(eol: bytes) -> None:
    line = b'{"t":"' + b"x" * (CAP - 8) + b'"}'
    raw = line + eol
    for cut in range(len(raw) + 1):
        assert feed_capped(raw, [cut]) == ([line.decode()], None)


def test_an_endless_line_is_refused_after_the_cap_not_buffered() -> None:
    d = NDJSONDecoder()  # the default cap
    chunk = b"x" * (64 << 10)
    fed = 0
    with pytest.raises(FrameTooLarge, match="line longer than"):
        for _ in range(10_000):  # 640 MB if nothing stopped it
            d.feed(chunk, fed)
            fed += len(chunk)
    assert MAX_LINE_BYTES < fed + len(chunk) <= MAX_LINE_BYTES + len(chunk)
