"""The round trip a run records (core/rtt.py, net/tcprtt.py's TCP_INFO parsing) and TTFT
less it."""

from __future__ import annotations

import struct

import pytest

from promptpath.core.rtt import PathRtt, network_adjusted, rtt_json, wire_words
from promptpath.net.tcprtt import parse_tcp_info


def _tcp_info(rtt_us: int, min_rtt_us: int | None, size: int = 232) -> bytes:
    """A struct tcp_info as Linux 6.x fills it: tcpi_rtt at 68, tcpi_min_rtt at 148."""
    raw = bytearray(size)
    struct.pack_into("=I", raw, 68, rtt_us)
    struct.pack_into("=I", raw, 72, rtt_us // 2)  # tcpi_rttvar: not read
    if min_rtt_us is not None and size >= 152:
        struct.pack_into("=I", raw, 148, min_rtt_us)
    return bytes(raw)


def test_tcp_info_gives_the_smoothed_rtt_and_the_connection_minimum_in_ms() -> None:
    rtt = parse_tcp_info(_tcp_info(41_250, 40_120))
    assert rtt is not None
    assert (rtt.smoothed_ms, rtt.min_ms) == (41.25, 40.12)


def test_an_older_kernels_shorter_tcp_info_has_no_minimum() -> None:
    rtt = parse_tcp_info(_tcp_info(41_250, None, size=104))
    assert rtt is not None and rtt.smoothed_ms == 41.25 and rtt.min_ms is None


def test_no_sample_and_the_kernels_no_minimum_read_as_none() -> None:
    rtt = parse_tcp_info(_tcp_info(0, 0xFFFFFFFF))
    assert rtt is not None and rtt.smoothed_ms is None and rtt.min_ms is None
    assert parse_tcp_info(b"\x00" * 40) is None  # too short to hold tcpi_rtt


def test_the_minimum_is_the_round_trip_subtracted_then_the_first_sample() -> None:
    both = PathRtt(source="tcp_info", first_ms=45.0, min_ms=40.2, smoothed_ms=52.0)
    assert both.used_ms == 40.2
    assert PathRtt(source="quic", first_ms=45.0, min_ms=None, smoothed_ms=52.0).used_ms == 45.0


def test_through_a_proxy_nothing_is_subtracted_and_the_words_say_whose_hop_it_is() -> None:
    hop = PathRtt(source="tcp_info", first_ms=0.3, min_ms=0.2, smoothed_ms=0.4, hop="proxy")
    assert hop.used_ms is None
    words = wire_words(hop, None)
    assert words is not None and "proxy's hop" in words and "not adjusted" in words
    assert rtt_json(hop) == {
        "source": "tcp_info",
        "hop": "proxy",
        "first_ms": 0.3,
        "min_ms": 0.2,
        "smoothed_ms": 0.4,
    }


@pytest.mark.parametrize(
    ("from_request", "rtt", "adjusted"),
    [(950.0, 38.0, 912.0), (30.0, 40.0, 0.0), (None, 40.0, None), (950.0, None, None)],
)
def test_ttft_less_one_round_trip_is_never_below_zero(
    from_request: float | None, rtt: float | None, adjusted: float | None
) -> None:
    assert network_adjusted(from_request, rtt) == adjusted


def test_the_terminal_words_split_server_side_from_the_wire() -> None:
    rtt = PathRtt(source="tcp_info", first_ms=39.0, min_ms=38.0, smoothed_ms=41.0)
    words = wire_words(rtt, 912.0)
    assert words is not None
    assert words.startswith("≈ 912 ms at the server side, 38 ms on the wire")
