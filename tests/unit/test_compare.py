"""HTTP/2 vs HTTP/3 differences from two timelines: pure, with hand-made stamps."""

from __future__ import annotations

import io
import json

from rich.console import Console

from promptpath.core.compare import (
    Difference,
    differences,
    differences_json,
    setup_round_trips,
    summary,
)
from promptpath.core.errors import ConnectError
from promptpath.core.timeline import ErrorInfo, Stage, StreamEvent, Timeline, TLSInfo
from promptpath.options import RunOptions, parse_target
from promptpath.report.compare import compare_json, render_compare, spans
from promptpath.tracer.orchestrator import TraceResult, pair_options

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
    rows = _by_key(differences(a, b))
    assert (rows["setup_round_trips"].a, rows["setup_round_trips"].b) == (2.0, 1.0)
    assert rows["setup_round_trips"].better == "b"
    assert rows["handshake_ms"].a == 30.0 and rows["handshake_ms"].b == 12.0
    assert rows["handshake_ms"].delta == -18.0 and rows["handshake_ms"].better == "b"
    assert rows["ttft_ms"].delta == -18.0
    assert rows["ttft_from_request_ms"].better == "same"
    assert rows["gap_p50_ms"].better == "same"
    lines = summary(list(rows.values()))
    assert (
        "HTTP/3 should need 1 round trip fewer before the request"
        " (expected from the protocol versions, not measured)"
    ) in lines
    assert any(
        line.startswith("TTFT (from start): HTTP/3 18.0 ms less than HTTP/2") for line in lines
    )


def test_small_differences_are_noise() -> None:
    a = _timeline(h3=False, wait=50)
    b = _timeline(h3=False, wait=51.5)
    rows = _by_key(differences(a, b))
    assert rows["ttfb_from_request_ms"].better == "same"
    assert summary([rows["ttfb_from_request_ms"]])[0] == (
        "no difference beyond noise between the two protocols"
    )


def test_round_trips_are_expected_from_the_protocols_not_measured() -> None:
    rows = differences(_timeline(h3=False), _timeline(h3=True))
    trips = _by_key(rows)["setup_round_trips"]
    assert trips.label == "expected setup round trips" and trips.measured is False
    assert all(d.measured for d in rows if d.key != "setup_round_trips")
    out = differences_json(rows)
    assert out["setup_round_trips"]["measured"] is False
    assert out["setup_round_trips"]["label"] == "expected setup round trips"
    assert out["ttft_ms"]["measured"] is True


def test_jitter_in_either_run_raises_the_noise_floor() -> None:
    # 18 ms less TTFT over HTTP/3, but HTTP/2's tokens came 10 or 40 ms apart: a
    # 30 ms interquartile spread that one sample per protocol cannot see past.
    a = _timeline(h3=False, gaps=(10, 40) * 4)
    b = _timeline(h3=True, handshake=(12,))
    rows = _by_key(differences(a, b))
    ttft = rows["ttft_ms"]
    assert ttft.delta == -18.0
    assert ttft.noise_floor == 30.0 and ttft.better == "same"
    assert rows["handshake_ms"].better == "same"  # 18 ms < 30 ms as well
    assert differences_json(list(rows.values()))["ttft_ms"]["noise_floor"] == 30.0
    # steady runs: the same 18 ms is beyond max(2 ms, 10 %) and counts
    steady = _by_key(differences(_timeline(h3=False), b))["ttft_ms"]
    assert steady.noise_floor < 18.0 and steady.better == "b"


def test_summary_says_one_pair_of_runs_is_one_sample() -> None:
    rows = differences(_timeline(h3=False, gaps=(10, 40) * 4), _timeline(h3=True))
    lines = summary(rows)
    assert lines[-1].startswith("one run per protocol is one sample")
    assert "gap IQR 30.0 ms" in lines[-1] and "repeat" in lines[-1]


def test_slower_gaps_on_one_side_are_called_out() -> None:
    a = _timeline(h3=False, gaps=(20, 20, 20, 20))
    b = _timeline(h3=True, gaps=(20, 20, 20, 200))
    rows = _by_key(differences(a, b))
    assert rows["gap_max_ms"].better == "a"
    assert rows["gap_p99_ms"].better == "a"
    assert rows["tokens_per_second"].better == "a"  # higher is better there


def test_missing_side_has_no_verdict() -> None:
    a = _timeline(h3=False)
    b = Timeline(t0_ns=T0, t0_unix_ns=0)  # failed before anything happened
    rows = _by_key(differences(a, b))
    assert rows["ttft_ms"].b is None and rows["ttft_ms"].delta is None
    assert rows["ttft_ms"].better is None


def test_differences_json_names_the_protocols() -> None:
    out = differences_json(differences(_timeline(h3=False), _timeline(h3=True, handshake=(5,))))
    assert out["handshake_ms"] == {
        "label": "handshake (TCP+TLS / QUIC)",
        "unit": "ms",
        "http2": 30.0,
        "http3": 5.0,
        "delta": -25.0,
        "better": "http3",
        "measured": True,
        "noise_floor": 3.0,
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
    assert "expected setup round trips" in text and "TTFT (from start)" in text
    assert "→ HTTP/3 should need 1 round trip fewer" in text
    assert "one run per protocol is one sample" in text


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
    assert body["summary"][-1].startswith("one run per protocol is one sample")
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
    rows = differences(a, b)
    out = differences_json(rows)
    assert out["handshake_ms"]["http2"] is None and out["handshake_ms"]["http3"] is None
    assert out["handshake_ms"]["delta"] is None and out["handshake_ms"]["better"] is None
    assert all(d["better"] is None and d["delta"] is None for d in out.values()), out
    lines = summary(rows, errors=(a.error, b.error))
    assert lines[0] == (
        "HTTP/2 failed in connect (refused): no connection, so none of its times are compared"
    )
    assert lines[1].startswith("HTTP/3 failed in quic_handshake (handshake_timeout)")
    assert lines[2] == "nothing to compare: no metric was measured on both runs"
    assert not any("less than" in line or "fewer" in line for line in lines)


def test_one_failed_side_keeps_the_other_value_without_a_winner() -> None:
    a = _timeline(h3=False)
    b = _failed_in("quic_handshake", 1805.89, "handshake_timeout")
    rows = _by_key(differences(a, b))
    assert rows["handshake_ms"].a == 30.0 and rows["handshake_ms"].b is None
    assert rows["handshake_ms"].better is None and rows["setup_round_trips"].better is None
    lines = summary(list(rows.values()), errors=(None, b.error))
    assert lines[0].startswith("HTTP/3 failed in quic_handshake")
    assert lines[1] == "nothing to compare: no metric was measured on both runs"


def test_a_stream_cut_short_compares_the_connection_but_not_the_stream() -> None:
    a = _timeline(h3=False, handshake=(10, 20))
    b = _timeline(h3=True, handshake=(12,))
    b.error = ErrorInfo(stage="stream", kind="truncated", message="cut")
    rows = _by_key(differences(a, b))
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
    end = _by_key(differences(results[0].timeline, results[1].timeline))["end_ms"]
    assert end.a is not None and end.b is not None and end.b > 100_000  # 9 characters
    assert any(f"{end.a:.1f}" in line and f"{end.b:.1f}" in line for line in table)
    assert all(len(line) <= 80 for line in lines)
