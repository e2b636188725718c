"""The AWS event-stream framer: every split point, both CRCs, impossible lengths, memory.

botocore's ``EventStreamBuffer`` is the independent reference: what our encoder writes it
must parse to the same headers and payload, and what it refuses our framer refuses too.
"""

from __future__ import annotations

import struct
import tracemalloc
import uuid
import zlib

import pytest
from botocore.eventstream import EventStreamBuffer
from hypothesis import given, settings
from hypothesis import strategies as st

from promptpath.streams.eventstream import (
    MAX_MESSAGE_BYTES,
    EventStreamDecoder,
    EventStreamError,
    encode_message,
)


def message(event_type: str, payload: bytes) -> bytes:
    return encode_message(
        [
            (":event-type", event_type),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload,
    )


STREAM = b"".join(
    message(name, payload)
    for name, payload in (
        ("messageStart", b'{"role":"assistant"}'),
        ("contentBlockDelta", b'{"contentBlockIndex":0,"delta":{"text":"Hel"}}'),
        ("contentBlockDelta", '{"contentBlockIndex":0,"delta":{"text":"lo \u00e9"}}'.encode()),
        ("messageStop", b'{"stopReason":"end_turn"}'),
    )
)


def decode_all(data: bytes, cuts: list[int]) -> list[tuple[str, bytes, int]]:
    dec = EventStreamDecoder()
    out = []
    at = 0
    for i, cut in enumerate([*cuts, len(data)]):
        for m in dec.feed(data[at:cut], i):
            out.append((m.string(":event-type"), m.payload, m.t_ns))
        at = cut
    assert not dec.pending
    return out


def test_botocore_parses_what_the_encoder_writes_to_the_same_messages() -> None:
    ref = EventStreamBuffer()
    ref.add_data(STREAM)
    theirs = [(m.headers, m.payload) for m in ref]
    ours = [(dict(m.headers), m.payload) for m in EventStreamDecoder().feed(STREAM, 0)]
    assert theirs == ours
    assert len(ours) == 4


def test_every_header_type_decodes_as_botocore_reads_it() -> None:
    # Types 0-9 built by hand (our encoder writes only 0, 1, 5, 6, 7, 9).
    def h(name: str, kind: int, value: bytes) -> bytes:
        return bytes([len(name)]) + name.encode() + bytes([kind]) + value

    headers = b"".join(
        [
            h("t", 0, b""),
            h("f", 1, b""),
            h("b", 2, struct.pack(">b", -3)),
            h("s", 3, struct.pack(">h", -300)),
            h("i", 4, struct.pack(">i", 70000)),
            h("l", 5, struct.pack(">q", -(2**40))),
            h("a", 6, struct.pack(">H", 3) + b"\x00\x01\x02"),
            h("str", 7, struct.pack(">H", 2) + b"ok"),
            h("ts", 8, struct.pack(">q", 1_700_000_000_000)),
            h("u", 9, uuid.UUID(int=7).bytes),
        ]
    )
    raw = _raw(headers, b"{}")
    ref = EventStreamBuffer()
    ref.add_data(raw)
    (theirs,) = list(ref)
    (ours,) = EventStreamDecoder().feed(raw, 0)
    mine = dict(ours.headers)
    assert mine["t"] is True and mine["f"] is False
    assert (mine["b"], mine["s"], mine["i"], mine["l"]) == (-3, -300, 70000, -(2**40))
    assert mine["a"] == b"\x00\x01\x02" and mine["str"] == "ok"
    assert mine["u"] == uuid.UUID(int=7)
    # botocore reads timestamps as a datetime and uuids as bytes; the integers agree.
    assert mine["ts"] == 1_700_000_000_000
    for name in ("t", "f", "b", "s", "i", "l", "a", "str"):
        assert theirs.headers[name] == mine[name], name


def _raw(headers: bytes, payload: bytes, *, total: int | None = None) -> bytes:
    total = 16 + len(headers) + len(payload) if total is None else total
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + headers + payload
    return body + struct.pack(">I", zlib.crc32(body))


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=6))
@settings(max_examples=200, deadline=None)
def test_any_split_of_the_stream_gives_the_same_messages(cuts: list[int]) -> None:
    whole = decode_all(STREAM, [])
    split = decode_all(STREAM, sorted(cuts))
    assert [(n, p) for n, p, _ in split] == [(n, p) for n, p, _ in whole]


def test_one_byte_at_a_time_stamps_each_message_with_the_read_that_completed_it() -> None:
    whole = EventStreamDecoder().feed(STREAM, 0)
    last_bytes = [m.offset + 16 + _headers_len(m.offset) + len(m.payload) - 1 for m in whole]
    dec = EventStreamDecoder()
    stamps = []
    for i in range(len(STREAM)):
        stamps.extend(m.t_ns for m in dec.feed(STREAM[i : i + 1], i))
    assert stamps == last_bytes
    assert stamps[-1] == len(STREAM) - 1


def _headers_len(offset: int) -> int:
    return int(struct.unpack_from(">I", STREAM, offset + 4)[0])


def test_offsets_name_where_each_message_starts() -> None:
    offsets = [m.offset for m in EventStreamDecoder().feed(STREAM, 0)]
    assert offsets[0] == 0
    assert offsets[1] == struct.unpack(">I", STREAM[:4])[0]


def test_a_flipped_payload_byte_is_a_message_crc_error_at_that_messages_offset() -> None:
    second = struct.unpack(">I", STREAM[:4])[0]
    bad = bytearray(STREAM)
    bad[second + 40] ^= 0x01
    dec = EventStreamDecoder()
    with pytest.raises(EventStreamError) as err:
        dec.feed(bytes(bad), 5)
    assert err.value.kind == "bad_frame" and err.value.stage == "stream"
    assert err.value.detail["offset"] == second
    assert f"at byte {second}" in err.value.message and "message CRC32" in err.value.message
    # The first message was whole: it is handed over on the error.
    assert [m.string(":event-type") for m in err.value.frames] == ["messageStart"]
    # botocore refuses the same bytes.
    ref = EventStreamBuffer()
    ref.add_data(bytes(bad))
    with pytest.raises(Exception, match=r"(?i)checksum|crc"):
        list(ref)
    assert dec.feed(STREAM, 6) == []  # closed after a broken frame


def test_a_bad_prelude_crc_is_refused_before_the_body_is_waited_for() -> None:
    bad = bytearray(STREAM[:12])
    bad[11] ^= 0xFF
    with pytest.raises(EventStreamError, match="prelude CRC32 mismatch") as err:
        EventStreamDecoder().feed(bytes(bad), 0)  # 12 bytes only: no wait for the rest
    assert err.value.detail["offset"] == 0


@pytest.mark.parametrize(
    ("total", "headers_len", "words"),
    [
        (15, 0, "shorter than the 16-byte minimum"),
        (20, 5, "does not fit"),
        (MAX_MESSAGE_BYTES + 1, 0, "exceeds"),
    ],
)
def test_impossible_lengths_are_decode_errors(total: int, headers_len: int, words: str) -> None:
    prelude = struct.pack(">II", total, headers_len)
    prelude += struct.pack(">I", zlib.crc32(prelude))
    with pytest.raises(EventStreamError, match=words):
        EventStreamDecoder().feed(prelude, 0)


def test_a_header_running_past_its_section_is_a_decode_error() -> None:
    raw = _raw(b"\x05:even", b"{}")  # a name of 5 bytes with no value type after it
    with pytest.raises(EventStreamError, match="runs past"):
        EventStreamDecoder().feed(raw, 0)


def test_an_unknown_header_value_type_is_a_decode_error() -> None:
    raw = _raw(b"\x01x\x0a", b"{}")
    with pytest.raises(EventStreamError, match="value type 10"):
        EventStreamDecoder().feed(raw, 0)


def test_a_100_mb_frame_length_is_refused_without_buffering_it() -> None:
    prelude = struct.pack(">II", 100 * 1024 * 1024, 0)
    prelude += struct.pack(">I", zlib.crc32(prelude))
    dec = EventStreamDecoder()
    tracemalloc.start()
    try:
        with pytest.raises(EventStreamError, match="exceeds"):
            # The prelude, then 1 MiB of what would be its body in 64 KiB reads.
            dec.feed(prelude, 0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024
    assert dec.feed(b"\x00" * (1 << 20), 1) == []


def test_a_message_within_the_cap_is_buffered_only_as_far_as_its_length() -> None:
    # A 2 MiB payload arriving in 64 KiB reads with the next message's start behind it:
    # the buffer never holds more than the message being assembled.
    big = message("chunk", b"x" * (2 << 20))
    data = big + STREAM
    dec = EventStreamDecoder()
    got = []
    for at in range(0, len(data), 65536):
        got.extend(dec.feed(data[at : at + 65536], at))
        assert len(dec._buffer) <= len(big)
    assert got[0].string(":event-type") == "chunk"
    assert len(got) == 5


def test_a_partial_message_at_eof_is_pending() -> None:
    dec = EventStreamDecoder()
    dec.feed(STREAM[:-3], 0)
    assert dec.pending
    assert dec.close(1) == []
