"""The server's account of its time: Server-Timing syntax, the figure the wait is split by,
request id and edge location."""

from __future__ import annotations

import pytest

from promptpath.core.servertime import (
    TimingMetric,
    parse_server_timing,
    server_account,
    split_words,
)

pytestmark = pytest.mark.unit


def test_several_metrics_with_dur_and_desc() -> None:
    got = parse_server_timing(['miss, db;dur=53, app;dur=47.2;desc="App work"'])
    assert got == [
        TimingMetric(name="miss"),
        TimingMetric(name="db", dur=53.0),
        TimingMetric(name="app", dur=47.2, desc="App work"),
    ]


def test_quoted_desc_keeps_commas_semicolons_and_escapes() -> None:
    got = parse_server_timing(['cfL4;desc="?proto=TCP&rtt=1,2;x=\\"y\\"", total;dur=9'])
    assert got == [
        TimingMetric(name="cfL4", desc='?proto=TCP&rtt=1,2;x="y"'),
        TimingMetric(name="total", dur=9.0),
    ]


def test_whitespace_case_and_several_header_lines() -> None:
    got = parse_server_timing(["  edge ; DUR = 1.5 ; desc=hit ", "origin;dur=20"])
    assert got == [
        TimingMetric(name="edge", dur=1.5, desc="hit"),
        TimingMetric(name="origin", dur=20.0),
    ]


def test_first_of_a_repeated_parameter_wins() -> None:
    assert parse_server_timing(["a;dur=1;dur=2"]) == [TimingMetric(name="a", dur=1.0)]


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("bad metric;dur=3, good;dur=4", ["good"]),  # junk after the name
        (";dur=3, good;dur=4", ["good"]),  # no name
        ('a;desc="unterminated, b;dur=1', ["a"]),  # the quote swallows the rest
        ("a;=5, b;dur=1", ["b"]),  # a parameter without a name
        (",,, a ,", ["a"]),
        ("", []),
        ("é;dur=1, b", ["b"]),  # not a token
    ],
)
def test_malformed_metrics_are_skipped_and_the_rest_read(value: str, names: list[str]) -> None:
    assert [m.name for m in parse_server_timing([value])] == names


@pytest.mark.parametrize("dur", ["abc", "-1", "inf", "nan", ""])
def test_a_dur_that_is_not_a_duration_is_none(dur: str) -> None:
    assert parse_server_timing([f"a;dur={dur}"]) == [TimingMetric(name="a")]


def test_total_is_the_servers_time_when_named() -> None:
    acc = server_account([("Server-Timing", "db;dur=80, total;dur=50")], wait_ms=70.0)
    assert acc is not None and acc.time is not None
    assert (acc.time.ms, acc.time.metric) == (50.0, "total")
    assert acc.network_ms == pytest.approx(20.0)


def test_without_total_the_largest_dur_counts_never_the_sum() -> None:
    acc = server_account([("server-timing", "db;dur=30, app;dur=45")], wait_ms=100.0)
    assert acc is not None and acc.time is not None
    assert (acc.time.ms, acc.time.metric) == (45.0, "app")


def test_the_outermost_figure_across_headers_splits_the_wait() -> None:
    headers = [
        ("openai-processing-ms", "312"),
        ("x-envoy-upstream-service-time", "330"),
        ("x-request-id", "req_abc"),
        ("cf-ray", "8f1c2d3e4f5a6b7c-FRA"),
    ]
    acc = server_account(headers, wait_ms=400.0)
    assert acc is not None and acc.time is not None
    assert [f.header for f in acc.figures] == [
        "openai-processing-ms",
        "x-envoy-upstream-service-time",
    ]
    assert acc.time.header == "x-envoy-upstream-service-time"
    assert acc.network_ms == pytest.approx(70.0)
    assert acc.request_id == ("x-request-id", "req_abc")
    assert [(e.header, e.location) for e in acc.edge] == [("cf-ray", "FRA")]
    words = split_words(acc)
    assert words == (
        "the server says it spent 330.0 ms (x-envoy-upstream-service-time); the other 70.0 ms"
        " of the 400.0 ms wait was network and queueing before it"
    )


def test_a_figure_over_the_wait_is_not_split() -> None:
    acc = server_account([("openai-processing-ms", "500")], wait_ms=100.0)
    assert acc is not None and acc.network_ms is None
    assert "more than the 100.0 ms wait" in (split_words(acc) or "")


def test_edge_locations_of_fastly_cloudfront_and_via() -> None:
    acc = server_account(
        [
            ("X-Served-By", "cache-iad-kiad7000056-IAD, cache-fra-eddf8230020-FRA"),
            ("X-Amz-Cf-Pop", "FRA56-P1"),
            ("Via", "1.1 varnish"),
            ("request-id", "req_011"),
        ],
        wait_ms=None,
    )
    assert acc is not None and acc.time is None and split_words(acc) is None
    assert [e.location for e in acc.edge] == ["FRA", "FRA56-P1", None]
    assert acc.request_id == ("request-id", "req_011")


def test_garbage_durations_and_no_known_headers() -> None:
    assert server_account([("content-type", "text/event-stream")], wait_ms=5.0) is None
    acc = server_account([("openai-processing-ms", "soon")], wait_ms=5.0)
    assert acc is None


# The issue-23 dialects' headers, as recorded responses of the real APIs show them
# (core/servertime.py cites the captures): one test per API, header sets trimmed.
def test_gemini_and_vertex_answer_with_the_google_front_ends_server_timing() -> None:
    acc = server_account(
        [("content-type", "text/event-stream"), ("server-timing", "gfet4t7; dur=773")],
        wait_ms=900.0,
    )
    assert acc is not None and acc.time is not None
    assert (acc.time.header, acc.time.metric, acc.time.ms) == ("server-timing", "gfet4t7", 773.0)
    assert acc.network_ms == pytest.approx(127.0)


def test_azure_openai_gives_its_apim_request_id_region_and_envoy_time() -> None:
    acc = server_account(
        [
            ("apim-request-id", "9da39506-6c13-4646-91eb-5e0f5cf0cc50"),
            ("x-envoy-upstream-service-time", "250"),
            ("x-ms-region", "Sweden Central"),
        ],
        wait_ms=300.0,
    )
    assert acc is not None and acc.time is not None
    assert acc.time.header == "x-envoy-upstream-service-time" and acc.time.ms == 250.0
    assert acc.request_id == ("apim-request-id", "9da39506-6c13-4646-91eb-5e0f5cf0cc50")
    assert [(e.header, e.location) for e in acc.edge] == [("x-ms-region", "Sweden Central")]
    # With both, x-request-id (the same value on Azure) is the one named.
    both = server_account([("apim-request-id", "a-1"), ("x-request-id", "a-1")], wait_ms=None)
    assert both is not None and both.request_id == ("x-request-id", "a-1")


def test_cohere_gives_its_debug_trace_id_envoy_time_and_googles_via() -> None:
    acc = server_account(
        [
            ("server", "envoy"),
            ("via", "1.1 google"),
            ("x-debug-trace-id", "68cf0a1a2924c2a2534e350092097d49"),
            ("x-envoy-upstream-service-time", "2573"),
        ],
        wait_ms=2700.0,
    )
    assert acc is not None and acc.time is not None and acc.time.ms == 2573.0
    assert acc.request_id == ("x-debug-trace-id", "68cf0a1a2924c2a2534e350092097d49")
    assert [e.value for e in acc.edge] == ["1.1 google"]
