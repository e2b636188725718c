"""HTTP/2 vs HTTP/3 differences from two timelines: pure, with hand-made stamps."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from promptpath.core.differences import (
    Difference,
    differences,
    differences_json,
    setup_round_trips,
    shown,
    summary,
)
from promptpath.core.errors import ConnectError
from promptpath.core.timeline import ErrorInfo, Stage, StreamEvent, Timeline, TLSInfo
from promptpath.options import RunOptions, parse_target
from promptpath.report.compare_http import compare_json, render_compare, spans
from promptpath.result import TraceResult
from promptpath.tracer.orchestrator import pair_options

MS = 1_000_000
T0 = 10_000 * MS


def _timeline(
    *,
    h3: bool,
    dns: float = 5,
    handshake: tuple[float, ...] = (10, 20),
    wait: float = 50,
    ttft_after: float = 5,
    gaps: tuple[float, ...] = (20, 20, 20, 20),
    tls_version: str = "TLSv1.3",
) -> Timeline:
    """A healthy trace: dns, connect+tls (or quic_handshake), request, stream."""
    tl = Timeline(t0_ns=T0, t0_unix_ns=0)
    t = 0.0

    def stage(name: str, length: float) -> None:
        nonlocal t
        tl.stages.append(
            Stage(name=name, start_ns=T0 + int(t * MS), end_ns=T0 + int((t + length) * MS))
        )
        t += length

    stage("dns", dns)
    tl.milestones["dns_done"] = T0 + int(t * MS)
    if h3:
        stage("quic_handshake", sum(handshake))
        tl.milestones["connected"] = tl.milestones["tls_done"] = T0 + int(t * MS)
        tl.http_version = "HTTP/3"
    else:
        stage("connect", handshake[0])
        tl.milestones["connected"] = T0 + int(t * MS)
        stage("tls", handshake[1])
        tl.milestones["tls_done"] = T0 + int(t * MS)
        tl.http_version = "HTTP/2"
    tl.tls = TLSInfo(sni="x", alpn_offered=(), version=tls_version)
    t += 1
    tl.milestones["request_sent"] = T0 + int(t * MS)
    t += wait
    tl.milestones["ttfb"] = T0 + int(t * MS)
    t += ttft_after
    stamps = [t]
    for g in gaps:
        stamps.append(stamps[-1] + g)
    for i, s in enumerate(stamps):
        tl.events.append(StreamEvent(t_ns=T0 + int(s * MS), kind="content", text="x", read_index=i))
    tl.milestones["first_event"] = tl.milestones["ttft"] = T0 + int(stamps[0] * MS)
    tl.milestones["last_token"] = T0 + int(stamps[-1] * MS)
    tl.milestones["end"] = T0 + int((stamps[-1] + 1) * MS)
    tl.closed_ns = tl.milestones["end"]
    tl.stream_end = "marker"
    return tl


def _options() -> RunOptions:
    return RunOptions(
        target=parse_target("https://api.example.com/v1/chat/completions"),
        provider="openai",
        model="m",
    )


def _by_key(rows: list[Difference]) -> dict[str, Difference]:
    return {d.key: d for d in rows}


def test_round_trips_come_from_the_protocols() -> None:
    assert setup_round_trips(_timeline(h3=False)) == 2
    assert setup_round_trips(_timeline(h3=False, tls_version="TLSv1.2")) == 3
    assert setup_round_trips(_timeline(h3=True)) == 1
    reused = _timeline(h3=False)
    reused.reused_connection = True
    assert setup_round_trips(reused) == 0


def test_h3_saves_a_round_trip_and_its_time() -> None:
    a = _timeline(h3=False, handshake=(10, 20))
    b = _timeline(h3=True, handshake=(12,))
    rows = _by_key(differences([a], [b]))
    assert (rows["setup_round_trips"].a, rows["setup_round_trips"].b) == (2.0, 1.0)
    assert rows["setup_round_trips"].better == "b"
    assert rows["handshake_ms"].a == 30.0 and rows["handshake_ms"].b == 12.0
    assert rows["handshake_ms"].delta == -18.0 and rows["handshake_ms"].better == "b"
    assert rows["ttft_ms"].delta == -18.0
    assert rows["ttft_from_request_ms"].better == "same"
    assert rows["gap_p50_ms"].better == "same"
    lines = summary(list(rows.values()))
    assert (
        "expected, not measured: HTTP/3 should need 1 round trip fewer before the request"
        " (from the protocol versions)"
    ) in lines
    # the measured rows come first, the expectation after them
    assert lines.index(next(line for line in lines if line.startswith("TTFT"))) < next(
        i for i, line in enumerate(lines) if line.startswith("expected")
    )
    assert any(
        line.startswith("TTFT (from start): HTTP/3 18.0 ms less than HTTP/2") for line in lines
    )


def test_small_differences_are_noise() -> None:
    a = _timeline(h3=False, wait=50)
    b = _timeline(h3=False, wait=51.5)
    rows = _by_key(differences([a], [b]))
    assert rows["ttfb_from_request_ms"].better == "same"
    assert summary([rows["ttfb_from_request_ms"]])[0] == (
        "no measured difference beyond the noise floor between the two protocols"
    )


def test_round_trips_are_expected_from_the_protocols_not_measured() -> None:
    rows = differences([_timeline(h3=False)], [_timeline(h3=True)])
    trips = _by_key(rows)["setup_round_trips"]
    assert trips.label == "setup round trips (expected, not measured)" and not trips.measured
    assert all(d.measured for d in rows if d.key != "setup_round_trips")
    assert rows[-1] is trips  # after every measured row
    out = differences_json(rows)
    assert out["setup_round_trips"]["measured"] is False
    assert list(out)[-1] == "setup_round_trips"
    assert out["ttft_ms"]["measured"] is True


def test_each_metric_has_its_own_noise_floor() -> None:
    # The case: token gaps 10 or 40 ms apart (a 30 ms IQR) must not swallow a
    # steady 18 ms handshake difference, as one floor for every metric did.
    a_runs = [_timeline(h3=False, handshake=(10, 20 + j / 10), gaps=(10, 40) * 4) for j in range(5)]
    b_runs = [_timeline(h3=True, handshake=(12 + j / 10,), gaps=(10, 40) * 4) for j in range(5)]
    rows = _by_key(differences(a_runs, b_runs))
    hs = rows["handshake_ms"]
    assert (len(hs.a_values), len(hs.b_values)) == (5, 5)
    # 10 % of the larger median (30.2 ms); the handshakes' own spread is only 0.2 + 0.2
    assert hs.noise_floor == pytest.approx(3.02)
    assert hs.better == "b"
    # each run's gap p90 is 40 ms: no spread there either, so the gaps compare as same
    assert rows["gap_p90_ms"].noise_floor == 4.0 and rows["gap_p90_ms"].better == "same"


def test_a_metric_that_jumps_around_gets_a_floor_from_its_own_spread() -> None:
    # TTFB after the request: HTTP/2 runs 50, 52, 58, 60, 70 ms (IQR 8), HTTP/3 runs
    # 45, 46, 47, 48, 49 (IQR 2): a 10 ms difference of medians is within 8 + 2.
    a_runs = [_timeline(h3=False, wait=w) for w in (50, 52, 58, 60, 70)]
    b_runs = [_timeline(h3=True, wait=w) for w in (45, 46, 47, 48, 49)]
    ttfb = _by_key(differences(a_runs, b_runs))["ttfb_from_request_ms"]
    assert ttfb.a == 58.0 and ttfb.b == 47.0
    assert ttfb.spread_a == 8.0 and ttfb.spread_b == 2.0
    assert ttfb.noise_floor == 10.0
    assert abs(ttfb.delta or 0) > ttfb.noise_floor and ttfb.better == "b"
    tighter = [_timeline(h3=False, wait=w) for w in (50, 54, 58, 62, 70)]  # IQR 8 -> 8
    assert _by_key(differences(tighter, b_runs))["ttfb_from_request_ms"].better == "b"
    wider = [_timeline(h3=False, wait=w) for w in (40, 45, 58, 60, 70)]  # IQR 15
    assert _by_key(differences(wider, b_runs))["ttfb_from_request_ms"].better == "same"


def test_no_winner_inside_the_floor_and_the_shown_figures_agree() -> None:
    # The review's row: "Δ +2.0 against a floor of 2.0" that named a winner (2.013 > 2.0).
    beyond = Difference(key="k", label="k", unit="ms", a_values=(10.0,), b_values=(12.013,))
    assert beyond.noise_floor == 2.0 and beyond.better == "a"
    assert shown(beyond) == ("+2.01", "2.00")
    within = Difference(key="k", label="k", unit="ms", a_values=(10.0,), b_values=(11.96,))
    assert within.better == "same" and shown(within) == ("+2.0", "2.0")
    exact = Difference(key="k", label="k", unit="ms", a_values=(10.0,), b_values=(12.0,))
    assert exact.better == "same"
    far = Difference(key="k", label="k", unit="ms", a_values=(10.0,), b_values=(30.0,))
    assert shown(far) == ("+20.0", "3.0")  # 10 % of 30 ms
    # the verdict is taken before rounding: 12.0004 is beyond 2.0 by 0.4 µs
    hair = Difference(key="k", label="k", unit="ms", a_values=(10.0,), b_values=(12.0004,))
    assert hair.better == "a"


def test_summary_says_how_many_runs_and_how_the_floor_was_set() -> None:
    one = summary(differences([_timeline(h3=False)], [_timeline(h3=True)]))
    assert one[-1].startswith("one run per protocol: no spread to measure")
    assert "--compare-runs" in one[-1]
    runs = [_timeline(h3=False)] * 5, [_timeline(h3=True)] * 4
    five = summary(differences(*runs), runs=(5, 4))
    assert five[-1].startswith("5 run(s) of HTTP/2 and 4 of HTTP/3, interleaved")
    assert "interquartile ranges" in five[-1]


def test_setup_incl_dns_is_left_out_when_it_repeats_the_handshake() -> None:
    literal = differences([_timeline(h3=False, dns=0)], [_timeline(h3=True, dns=0)])
    assert "setup_ms" not in _by_key(literal)
    named = _by_key(differences([_timeline(h3=False)], [_timeline(h3=True, dns=0)]))
    assert named["setup_ms"].a == 35.0 and named["setup_ms"].b == 30.0


def test_client_hello_build_is_compared_on_its_own() -> None:
    a, b = _timeline(h3=False), _timeline(h3=True, handshake=(12,))
    a.client_hello_ns, b.client_hello_ns = 200_000, 2_500_000
    rows = _by_key(differences([a], [b]))
    assert rows["client_hello_ms"].a == 0.2 and rows["client_hello_ms"].b == 2.5
    assert rows["handshake_ms"].b == 12.0  # not in the handshake


def _on_loopback(tl: Timeline) -> Timeline:
    tl.address, tl.family = ("127.0.0.1", 443), "ipv4"
    return tl


def test_on_loopback_a_difference_beyond_the_floor_is_client_side_not_a_winner() -> None:
    a = _on_loopback(_timeline(h3=False, handshake=(0.1, 1.4)))
    b = _on_loopback(_timeline(h3=True, handshake=(6.0,)))
    rows = differences([a], [b])
    by_key = _by_key(rows)
    hs = by_key["handshake_ms"]
    assert hs.beyond_floor and hs.client_side and hs.better == "same"
    assert by_key["setup_round_trips"].better == "b"  # the expectation still stands
    out = differences_json(rows)
    assert out["handshake_ms"]["client_side"] is True and out["handshake_ms"]["better"] == "same"
    assert out["gap_p50_ms"]["client_side"] is False
    lines = summary(rows)
    assert (
        "handshake (TCP+TLS / QUIC): HTTP/3 4.5 ms slower here, beyond the noise floor but"
        " client and server CPU on this host, not the path"
    ) in lines
    assert any(line.startswith("the target is on this host (loopback") for line in lines)
    assert not any("less than" in line for line in lines)
    # the same runs to a remote address name the winner
    for tl in (a, b):
        tl.address = ("192.0.2.1", 443)
    assert _by_key(differences([a], [b]))["handshake_ms"].better == "a"


def test_slower_gaps_on_one_side_are_called_out() -> None:
    a = _timeline(h3=False, gaps=(20, 20, 20, 20))
    b = _timeline(h3=True, gaps=(20, 20, 20, 200))
    rows = _by_key(differences([a], [b]))
    assert rows["gap_max_ms"].better == "a"
    assert rows["gap_p99_ms"].better == "a"
    assert rows["tokens_per_second"].better == "a"  # higher is better there


def test_missing_side_has_no_verdict() -> None:
    a = _timeline(h3=False)
    b = Timeline(t0_ns=T0, t0_unix_ns=0)  # failed before anything happened
    rows = _by_key(differences([a], [b]))
    assert rows["ttft_ms"].b is None and rows["ttft_ms"].delta is None
    assert rows["ttft_ms"].better is None


def test_differences_json_names_the_protocols() -> None:
    out = differences_json(differences([_timeline(h3=False)], [_timeline(h3=True, handshake=(5,))]))
    assert out["handshake_ms"] == {
        "label": "handshake (TCP+TLS / QUIC)",
        "unit": "ms",
        "http2": 30.0,
        "http3": 5.0,
        "delta": -25.0,
        "better": "http3",
        "measured": True,
        "noise_floor": 3.0,
        "client_side": False,
        "samples": {"http2": 1, "http3": 1},
        "spread": {"http2": None, "http3": None},
        "values": {"http2": [30.0], "http3": [5.0]},
    }
    json.dumps(out)  # serialisable as is


def test_pair_options_only_change_the_protocol() -> None:
    h2, h3 = pair_options(_options())
    assert (h2.http, h3.http) == ("2", "3")
    assert h2.target == h3.target and h2.prompt == h3.prompt


def test_spans_place_quic_handshake_on_the_t0_axis() -> None:
    rows = spans(_timeline(h3=True, dns=5, handshake=(12,)))
    keys = [r[1] for r in rows]
    assert keys[:2] == ["dns", "quic_handshake"]
    assert rows[1][3:] == (5.0, 17.0)


def _results() -> list[TraceResult]:
    h2, h3 = pair_options(_options())
    return [
        TraceResult(options=h2, timeline=_timeline(h3=False)),
        TraceResult(options=h3, timeline=_timeline(h3=True, handshake=(12,))),
    ]


def test_terminal_shows_both_waterfalls_and_the_differences() -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, no_color=True, highlight=False)
    render_compare(console, _results())
    text = out.getvalue()
    assert "HTTP/2 vs HTTP/3" in text
    assert "TCP connect" in text and "QUIC handshake" in text
    assert "setup round trips (expected" in text and "TTFT (from start)" in text
    assert "→ expected, not measured: HTTP/3 should need 1 round trip fewer" in text
    assert "→ one run per protocol: no spread to measure" in text


def test_terminal_names_a_failed_side() -> None:
    results = _results()
    failed = Timeline(t0_ns=T0, t0_unix_ns=0)
    failed.stages.append(Stage(name="dns", start_ns=T0, end_ns=T0 + MS))
    failed.stages.append(
        Stage(name="quic_handshake", start_ns=T0 + MS, end_ns=T0 + 900 * MS, ok=False)
    )
    failed.error = ErrorInfo.from_error(
        ConnectError("UDP blocked", stage="quic_handshake", kind="handshake_timeout")
    )
    results[1] = TraceResult(options=results[1].options, timeline=failed)
    out = io.StringIO()
    render_compare(Console(file=out, width=100, no_color=True), results)
    assert "FAILED in quic_handshake: UDP blocked" in out.getvalue()


def test_compare_json_has_two_runs_and_the_differences() -> None:
    body = compare_json(_results())
    assert body["schema"] == "promptpath.compare/1"
    assert body["ok"] is True
    assert [r["http_version"] for r in body["results"]] == ["HTTP/2", "HTTP/3"]
    assert "quic_handshake" in body["results"][1]["stages_ms"]
    assert body["differences"]["setup_round_trips"]["http3"] == 1.0
    assert body["differences"]["setup_round_trips"]["measured"] is False
    assert body["samples_per_protocol"] == 1
    assert body["summary"][-1].startswith("one run per protocol: no spread to measure")
    assert body["loopback"] is False
    json.dumps(body, default=str)


def test_compare_json_exit_codes_follow_each_run() -> None:
    results = _results()
    results[1].timeline.error = ErrorInfo.from_error(
        ConnectError("UDP blocked", stage="quic_handshake", kind="handshake_timeout")
    )
    body = compare_json(results)
    assert [r["exit_code"] for r in body["results"]] == [0, 4]
    assert body["ok"] is False


def _failed_in(stage: str, length_ms: float, kind: str) -> Timeline:
    """A run that resolved the name, then failed in ``stage`` after ``length_ms``."""
    tl = Timeline(t0_ns=T0, t0_unix_ns=0)
    tl.stages.append(Stage(name="dns", start_ns=T0, end_ns=T0 + MS))
    tl.milestones["dns_done"] = T0 + MS
    end = T0 + MS + int(length_ms * MS)
    tl.stages.append(Stage(name=stage, start_ns=T0 + MS, end_ns=end, ok=False))
    tl.error = ErrorInfo(stage=stage, kind=kind, message=f"{stage} failed")
    return tl


def test_failed_handshakes_are_not_compared_and_the_summary_says_where() -> None:
    # The review's case: TCP refused (0.659 ms) and UDP silent (1805.89 ms) on one port.
    # Both durations are times to fail; "HTTP/2 1806.0 ms less than HTTP/3" was a lie.
    a = _failed_in("connect", 0.659, "refused")
    b = _failed_in("quic_handshake", 1805.89, "handshake_timeout")
    rows = differences([a], [b])
    out = differences_json(rows)
    assert out["handshake_ms"]["http2"] is None and out["handshake_ms"]["http3"] is None
    assert out["handshake_ms"]["delta"] is None and out["handshake_ms"]["better"] is None
    assert all(d["better"] is None and d["delta"] is None for d in out.values()), out
    lines = summary(rows, errors=(a.error, b.error))
    assert lines[0] == (
        "HTTP/2 failed in connect (refused): no connection, so none of its times are compared"
    )
    assert lines[1].startswith("HTTP/3 failed in quic_handshake (handshake_timeout)")
    assert lines[2] == "nothing to compare: no metric was measured on both protocols"
    assert not any("less than" in line or "fewer" in line for line in lines)


def test_one_failed_side_keeps_the_other_value_without_a_winner() -> None:
    a = _timeline(h3=False)
    b = _failed_in("quic_handshake", 1805.89, "handshake_timeout")
    rows = _by_key(differences([a], [b]))
    assert rows["handshake_ms"].a == 30.0 and rows["handshake_ms"].b is None
    assert rows["handshake_ms"].better is None and rows["setup_round_trips"].better is None
    lines = summary(list(rows.values()), errors=(None, b.error))
    assert lines[0].startswith("HTTP/3 failed in quic_handshake")
    assert lines[1] == "nothing to compare: no metric was measured on both protocols"


def test_a_stream_cut_short_compares_the_connection_but_not_the_stream() -> None:
    a = _timeline(h3=False, handshake=(10, 20))
    b = _timeline(h3=True, handshake=(12,))
    b.error = ErrorInfo(stage="stream", kind="truncated", message="cut")
    rows = _by_key(differences([a], [b]))
    assert rows["handshake_ms"].better == "b" and rows["ttft_ms"].better == "b"
    for key in ("gap_p50_ms", "gap_max_ms", "tokens_per_second", "end_ms"):
        assert rows[key].b is None and rows[key].better is None, key
    lines = summary(list(rows.values()), errors=(None, b.error))
    assert lines[0] == (
        "HTTP/3 failed in stream (truncated): its times from that stage on are not compared"
    )
    assert any(line.startswith("handshake (TCP+TLS / QUIC): HTTP/3") for line in lines)


def test_failed_runs_show_dashes_and_name_the_failure_in_the_terminal() -> None:
    h2, h3 = pair_options(_options())
    results = [
        TraceResult(options=h2, timeline=_failed_in("connect", 0.659, "refused")),
        TraceResult(
            options=h3, timeline=_failed_in("quic_handshake", 1805.89, "handshake_timeout")
        ),
    ]
    out = io.StringIO()
    render_compare(Console(file=out, width=100, no_color=True), results)
    text = out.getvalue()
    assert "less than" not in text
    assert "→ HTTP/2 failed in connect (refused)" in text
    handshake = next(line for line in text.splitlines() if line.startswith("handshake"))
    assert handshake.split()[-3:] == ["—", "—", "—"], handshake  # HTTP/2, HTTP/3, Δ
    body = compare_json(results)
    assert body["differences"]["handshake_ms"]["better"] is None
    assert body["summary"][0].startswith("HTTP/2 failed in connect")


def test_protocol_headers_stay_whole_at_80_columns_with_wide_values() -> None:
    # Minute-long waits: 9-character values made rich cut every no_wrap column,
    # headers included ("HTT…  HTT…", "nois…").
    h2, h3 = pair_options(_options())
    slow = {"wait": 50_000.0, "gaps": (2000.0, 40_000.0, 100.0, 12_000.0)}
    results = [
        TraceResult(options=h2, timeline=_timeline(h3=False, handshake=(1000, 2000), **slow)),
        TraceResult(options=h3, timeline=_timeline(h3=True, handshake=(12_000,), **slow)),
    ]
    out = io.StringIO()
    render_compare(Console(file=out, width=80, no_color=True, highlight=False), results)
    lines = out.getvalue().splitlines()
    header = next(line for line in lines if line.startswith("metric"))
    assert header.split() == ["metric", "HTTP/2", "HTTP/3", "Δ", "noise", "±", "better"]
    table = lines[lines.index(header) :]
    assert not any("…" in line for line in table), "\n".join(table)
    end = _by_key(differences([results[0].timeline], [results[1].timeline]))["end_ms"]
    assert end.a is not None and end.b is not None and end.b > 100_000  # 9 characters
    assert any(f"{end.a:.1f}" in line and f"{end.b:.1f}" in line for line in table)
    assert all(len(line) <= 80 for line in lines)


def test_compare_json_shows_the_median_run_of_each_side_and_counts_every_run() -> None:
    h2, h3 = pair_options(_options())
    results = []
    for wait in (50, 90, 70):  # interleaved, as trace_pair runs them
        results.append(TraceResult(options=h2, timeline=_timeline(h3=False, wait=wait)))
        results.append(TraceResult(options=h3, timeline=_timeline(h3=True, wait=wait - 10)))
    body = compare_json(results)
    assert body["samples_per_protocol"] == 3
    ttfb = body["differences"]["ttfb_from_request_ms"]
    assert ttfb["values"] == {"http2": [50.0, 90.0, 70.0], "http3": [40.0, 80.0, 60.0]}
    assert (ttfb["http2"], ttfb["http3"], ttfb["samples"]) == (70.0, 60.0, {"http2": 3, "http3": 3})
    assert [r["ttft_ms"]["from_request"] for r in body["results"]] == [75.0, 65.0]
    assert body["summary"][-1].startswith("3 run(s) of HTTP/2 and 3 of HTTP/3, interleaved")


def test_a_failed_side_echoing_the_key_is_redacted_and_escaped_on_the_terminal_and_in_json() -> (
    None
):
    import dataclasses

    key = "sk-compare-0123456789abcdefghij"
    options = dataclasses.replace(
        _options(),
        target=parse_target(f"https://api.example.com/v1/chat/completions?api_key={key}"),
        api_key=key,
    )
    h2, h3 = pair_options(options)
    failed = Timeline(t0_ns=T0, t0_unix_ns=0)
    failed.stages.append(Stage(name="dns", start_ns=T0, end_ns=T0 + MS))
    failed.error = ErrorInfo.from_error(
        ConnectError(f"peer said \x1b]0;x\x07 {key[:15]}", stage="quic_handshake", kind="refused")
    )
    results = [
        TraceResult(options=h2, timeline=_timeline(h3=False)),
        TraceResult(options=h3, timeline=failed),
    ]
    out = io.StringIO()
    render_compare(Console(file=out, width=100, no_color=True), results)
    text = out.getvalue()
    # The header line printed the raw URL: its api_key query value is a secret too.
    assert key[:12] not in text and "\x1b" not in text
    assert "peer said \\x1b]0;x [redacted]" in text
    body = json.dumps(compare_json(results))
    assert key[:12] not in body
