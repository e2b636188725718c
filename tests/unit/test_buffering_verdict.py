"""The buffering verdict on synthetic timelines: every delivery shape a hop produces."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from promptpath.core.findings import Verdict
from promptpath.core.timeline import BodyChunk, Read, StreamEvent, Timeline, Usage
from promptpath.probes.buffering.delivery import MIN_EVENTS, buffer_size_of, bursts_of, units_of
from promptpath.probes.buffering.verdict import holds_of, judge
from promptpath.probes.hophints import header_hints

MS = 1_000_000
T0_UNIX = 1_800_000_000_000_000_000
EVENT_BYTES = 320


def timeline(
    groups: Sequence[tuple[float, Sequence[float]]],
    *,
    headers: Sequence[tuple[str, str]] = (("content-type", "text/event-stream"),),
    event_bytes: int = EVENT_BYTES,
    read_bytes: Sequence[int] | None = None,
    clock_offset_ms: float = 0.0,
    stamped: bool = True,
    ttfb_ms: float | None = None,
) -> Timeline:
    """A traced stream: each group is (arrival ms, [server send ms of each event in it]).

    One group is one socket read. Times are ms after the request was sent (t0 = 0).
    ``clock_offset_ms`` moves the server's clock (a second machine).
    """
    tl = Timeline(t0_ns=0, t0_unix_ns=T0_UNIX)
    tl.milestones["request_sent"] = 0
    tl.response_headers = list(headers)
    first = groups[0][0] if groups else 0.0
    tl.milestones["ttfb"] = int((first if ttfb_ms is None else ttfb_ms) * MS)
    seq = 0
    for i, (arrival, sends) in enumerate(groups):
        t_ns = int(arrival * MS)
        # Events differ by a few bytes (token text, ids), as in every real stream.
        sizes = [event_bytes + (seq + k) % 5 for k in range(len(sends))] or [event_bytes]
        nbytes = read_bytes[i] if read_bytes is not None else sum(sizes)
        tl.reads.append(Read(t_ns, nbytes))
        tl.chunks.append(BodyChunk(t_ns=t_ns, nbytes=nbytes, read_index=i))
        for sent in sends:
            sent_unix = T0_UNIX + int((sent + clock_offset_ms) * MS) if stamped else None
            tl.events.append(
                StreamEvent(
                    t_ns=t_ns,
                    kind="content",
                    text=str(seq),
                    server_sent_unix_ns=sent_unix,
                    seq=seq if stamped else None,
                    read_index=i,
                )
            )
            seq += 1
    if groups:
        tl.closed_ns = int(groups[-1][0] * MS)
        tl.stream_end = "marker"
    return tl


def sends(n: int, every_ms: float = 50.0, start_ms: float = 10.0) -> list[float]:
    return [start_ms + i * every_ms for i in range(n)]


def streamed(n: int = 60, every_ms: float = 50.0, lag_ms: float = 1.0) -> Timeline:
    return timeline([(s + lag_ms, [s]) for s in sends(n, every_ms)])


def flushed(
    n: int, per_flush: int, every_ms: float = 50.0, flush_bytes: int | None = 4096
) -> Timeline:
    """A buffer that flushes every ``per_flush`` events (and at the end): ``flush_bytes``
    each (a size-triggered buffer), or None for the events' own bytes (a timer's flush)."""
    all_sends = sends(n, every_ms)
    groups = []
    for i in range(0, n, per_flush):
        batch = all_sends[i : i + per_flush]
        groups.append((batch[-1] + 1.0, batch))
    if flush_bytes is None:
        return timeline(groups)
    sizes = [flush_bytes if len(g[1]) == per_flush else EVENT_BYTES * len(g[1]) for g in groups]
    return timeline(groups, read_bytes=sizes)


def whole(n: int = 60, every_ms: float = 50.0) -> Timeline:
    s = sends(n, every_ms)
    return timeline([(s[-1] + 2.0, s)], read_bytes=[EVENT_BYTES * n])


def test_a_stream_delivered_event_by_event_passes() -> None:
    finding = judge(streamed(), canary=False)
    assert finding.verdict is Verdict.PASS
    assert finding.evidence["pattern"] == "streamed"
    assert finding.evidence["bursts"] == []
    assert "60 events in 60 separate deliveries" in finding.summary
    assert finding.advice == []


def test_a_fast_server_streaming_every_2ms_is_not_mistaken_for_a_flush() -> None:
    finding = judge(streamed(n=120, every_ms=2.0), canary=False)
    assert finding.verdict is Verdict.PASS
    assert finding.evidence["pattern"] == "streamed"


def test_buffer_sized_bursts_after_long_silences_fail_and_name_the_buffer() -> None:
    finding = judge(flushed(60, per_flush=13, every_ms=50.0), canary=False)
    assert finding.verdict is Verdict.FAIL
    ev = finding.evidence
    assert ev["pattern"] == "bursts"
    assert ev["buffer_size_bytes"] == 4096
    assert ev["burst_bytes"][:4] == [4096, 4096, 4096, 4096]  # type: ignore[index]
    silences = ev["silences_ms"]
    assert isinstance(silences, list) and all(640 <= s <= 660 for s in silences[:3])
    assert "4.0 KiB" in finding.summary
    assert any("proxy_buffering off" in a for a in finding.advice)


def test_short_coalescing_bursts_warn_and_point_at_haproxy_no_delay() -> None:
    # haproxy without `option http-no-delay`: ~4 events per 200 ms cork window.
    finding = judge(flushed(60, per_flush=4, every_ms=50.0, flush_bytes=None), canary=False)
    assert finding.verdict is Verdict.WARN
    assert finding.evidence["pattern"] == "bursts"
    assert finding.evidence["buffer_size_bytes"] is None
    assert any("http-no-delay" in a for a in finding.advice)


def test_the_whole_answer_in_one_late_burst_fails() -> None:
    finding = judge(whole(), canary=False)
    assert finding.verdict is Verdict.FAIL
    assert finding.evidence["pattern"] == "whole"
    assert "whole-response delivery: 60 of 60 events" in finding.summary
    mechanism = finding.evidence["mechanism"]
    assert isinstance(mechanism, dict) and mechanism["kind"] == "whole_response"


def test_a_whole_flush_spread_over_tcp_windows_is_still_whole() -> None:
    s = sends(60)
    at = s[-1] + 2.0
    tl = timeline([(at, s[:20]), (at + 40.0, s[20:40]), (at + 80.0, s[40:])])
    finding = judge(tl, canary=False)
    assert finding.evidence["pattern"] == "whole"
    assert finding.verdict is Verdict.FAIL


def test_a_whole_answer_that_came_at_once_quickly_is_too_fast_to_judge() -> None:
    s = sends(40, every_ms=1.0)
    finding = judge(timeline([(s[-1] + 1.0, s)]), canary=False)
    assert finding.verdict is Verdict.SKIP
    assert "too fast" in finding.summary


def test_a_short_stream_is_skipped_with_the_reason_not_passed() -> None:
    finding = judge(streamed(n=MIN_EVENTS - 12), canary=False, max_tokens=8)
    assert finding.verdict is Verdict.SKIP
    assert "only 8 content events" in finding.summary
    assert "raise --max-tokens to ≥ 64" in finding.summary
    assert finding.evidence["pattern"] is None
    assert finding.evidence["tokens"] == {
        "asked": 8,
        "sent": 8,
        "counted_from": "events",
        "stopped_early": False,
    }


def test_a_server_that_stopped_short_of_max_tokens_is_not_told_to_raise_it() -> None:
    finding = judge(streamed(n=10), canary=False, max_tokens=64)
    assert finding.verdict is Verdict.SKIP
    assert "--max-tokens to" not in finding.summary
    assert "the server stopped early: 10 content events of the 64 tokens asked for" in (
        finding.summary
    )
    tokens = finding.evidence["tokens"]
    assert isinstance(tokens, dict) and tokens["stopped_early"] is True


def test_the_servers_own_token_count_decides_whether_it_stopped_early() -> None:
    # 10 events carrying 64 tokens between them: the limit was reached, ask for more.
    tl = streamed(n=10)
    tl.events.append(
        StreamEvent(t_ns=tl.events[-1].t_ns, kind="end", usage=Usage(output_tokens=64))
    )
    finding = judge(tl, canary=False, max_tokens=64)
    assert finding.evidence["tokens"] == {
        "asked": 64,
        "sent": 64,
        "counted_from": "usage",
        "stopped_early": False,
    }
    assert "raise --max-tokens to ≥ 256" in finding.summary  # 2 x 20 events at 6.4 a piece
    early = streamed(n=10)
    early.events.append(
        StreamEvent(t_ns=early.events[-1].t_ns, kind="end", usage=Usage(output_tokens=12))
    )
    summary = judge(early, canary=False, max_tokens=64).summary
    assert "stopped early: 12 tokens of the 64 tokens asked for" in summary


def test_content_length_on_a_short_event_stream_warns_instead_of_skipping() -> None:
    # The review's case: Content-Length: 556, ten events, --max-tokens 64.
    tl = streamed(n=10)
    tl.response_headers.append(("Content-Length", "556"))
    finding = judge(tl, canary=False, max_tokens=64)
    assert finding.verdict is Verdict.WARN
    assert finding.summary.startswith("a hop sent Content-Length: 556 on the event stream")
    assert "could not be judged" in finding.summary
    assert "--max-tokens to" not in finding.summary
    assert any("Content-Length" in a for a in finding.advice)
    assert not any("http-no-delay" in a for a in finding.advice)  # nothing coalesced


def test_gzip_and_content_length_on_a_short_event_stream_warn_with_both_named() -> None:
    tl = streamed(n=10)
    tl.response_headers += [("Content-Encoding", "gzip"), ("Content-Length", "556")]
    for canary in (False, True):
        finding = judge(tl, canary=canary, max_tokens=64)
        assert finding.verdict is Verdict.WARN
        assert "Content-Length: 556" in finding.summary and "(gzip)" in finding.summary
        assert any("compression" in a for a in finding.advice)
        assert any("Content-Length" in a for a in finding.advice)


def test_content_length_on_a_streamed_event_stream_warns() -> None:
    tl = streamed()
    tl.response_headers.append(("Content-Length", "19200"))
    finding = judge(tl, canary=True, max_tokens=60)
    assert finding.verdict is Verdict.WARN
    assert "but a hop sent Content-Length: 19200" in finding.summary


def test_content_length_on_a_json_error_body_is_no_stream_sign() -> None:
    tl = timeline([], headers=(("content-type", "application/json"), ("content-length", "87")))
    finding = judge(tl, canary=False, max_tokens=64)
    assert finding.evidence["signs"] == {}
    assert finding.verdict is Verdict.SKIP


def test_an_empty_stream_is_skipped() -> None:
    finding = judge(timeline([]), canary=False)
    assert finding.verdict is Verdict.SKIP


def test_clumps_at_a_steady_100ms_pace_are_a_timer_not_a_stream() -> None:
    # Sent 5 ms apart, delivered 6 at a time every 100 ms: the shortest timer graded.
    s = sends(24, every_ms=5.0)
    groups = [(300.0 + (i // 6) * 100.0, s[i : i + 6]) for i in range(0, 24, 6)]
    finding = judge(timeline(groups), canary=False)
    assert finding.verdict is Verdict.WARN
    mechanism = finding.evidence["mechanism"]
    assert isinstance(mechanism, dict) and mechanism["kind"] == "time_coalescing"
    assert mechanism["interval_ms"] == 100.0


def test_compression_on_a_streamed_event_stream_warns() -> None:
    tl = streamed()
    tl.response_headers.append(("Content-Encoding", "gzip"))
    finding = judge(tl, canary=False)
    assert finding.verdict is Verdict.WARN
    assert finding.evidence["signs"] == {"content_encoding": "gzip"}
    assert any("compression" in a for a in finding.advice)


def test_content_length_on_an_event_stream_is_reported_as_a_sign() -> None:
    tl = whole()
    tl.response_headers.append(("Content-Length", "19200"))
    finding = judge(tl, canary=False)
    assert finding.evidence["signs"]["content_length"] == "19200"  # type: ignore[index]
    assert any("Content-Length" in a for a in finding.advice)


def test_headers_held_until_the_first_body_bytes_are_a_sign() -> None:
    tl = flushed(60, per_flush=13)
    finding = judge(tl, canary=False)
    signs = finding.evidence["signs"]
    assert isinstance(signs, dict)
    assert signs["headers_with_first_body_after_ms"] == pytest.approx(611.0, abs=1)
    # Headers that came at once, before the body, are no sign.
    tl2 = streamed()
    tl2.milestones["ttfb"] = 0
    assert "headers_with_first_body_after_ms" not in judge(tl2, canary=False).evidence["signs"]  # type: ignore[operator]


def test_hop_headers_are_named() -> None:
    hints = header_hints(
        [
            ("Server", "nginx/1.22.1"),
            ("Via", "1.1 varnish (Varnish/7.1)"),
            ("CF-RAY", "8a1b2c3d4e5f-AMS"),
            ("X-Cache", "MISS from edge"),
            ("content-type", "text/event-stream"),
        ]
    )
    assert [h["hop"] for h in hints] == ["nginx", "varnish", "cloudflare", "cache (X-Cache)"]


def test_nginx_named_in_headers_gets_nginx_advice_only() -> None:
    tl = flushed(60, per_flush=13)
    tl.response_headers.append(("Server", "nginx"))
    finding = judge(tl, canary=False)
    assert finding.evidence["hops"] == ["nginx"]
    assert "at nginx (named by Server: nginx)" in finding.summary
    assert len(finding.advice) == 1 and finding.advice[0].startswith("nginx:")


def test_caddy_named_in_headers_gets_caddy_advice() -> None:
    tl = whole()
    tl.response_headers.append(("Server", "Caddy"))
    finding = judge(tl, canary=False)
    assert any(a.startswith("caddy:") and "encode" in a for a in finding.advice)


# -- delivery structure ----------------------------------------------------------------
def test_units_group_reads_within_the_window_and_count_silences() -> None:
    tl = timeline([(100.0, [1.0]), (105.0, [2.0]), (400.0, [3.0, 4.0, 5.0])])
    units = units_of(tl)
    assert [(u.nevents, u.nreads) for u in units] == [(2, 2), (3, 1)]
    assert units[0].silence_ns == 100 * MS
    assert units[1].silence_ns == 295 * MS
    assert not units[0].dense and units[1].dense


def test_bursts_need_density_after_a_silence() -> None:
    tl = flushed(39, per_flush=13)
    bursts = bursts_of(units_of(tl))
    assert [b.nevents for b in bursts] == [13, 13, 13]
    assert buffer_size_of(bursts) == 4096


def test_buffer_size_needs_more_than_one_full_burst() -> None:
    tl = flushed(20, per_flush=13)
    assert buffer_size_of(bursts_of(units_of(tl))) is None


# -- canary ----------------------------------------------------------------------------
def test_canary_holds_are_near_zero_on_a_streaming_path() -> None:
    finding = judge(streamed(lag_ms=0.5), canary=True)
    assert finding.verdict is Verdict.PASS
    delay = finding.evidence["added_delay_ms"]
    assert isinstance(delay, dict) and delay["max"] < 1
    assert finding.evidence["clock"] == "synced"
    assert finding.evidence["floor_lag_ms"] == pytest.approx(0.5)


def test_canary_measures_holds_growing_through_each_burst() -> None:
    finding = judge(flushed(60, per_flush=13), canary=True)
    assert finding.verdict is Verdict.FAIL
    delay = finding.evidence["added_delay_ms"]
    assert isinstance(delay, dict)
    assert delay["max"] == pytest.approx(600, abs=1)  # first of 13 events, 50 ms apart
    assert delay["p50"] >= 250
    assert finding.evidence["flushes"] == 4
    assert "held" in finding.summary


def test_canary_holds_of_a_200ms_cork_warn() -> None:
    finding = judge(flushed(60, per_flush=4, flush_bytes=None), canary=True)
    assert finding.verdict is Verdict.WARN
    delay = finding.evidence["added_delay_ms"]
    assert isinstance(delay, dict) and delay["max"] == pytest.approx(150, abs=1)


def test_canary_needs_no_clock_agreement() -> None:
    ahead = timeline([(s + 1.0, [s]) for s in sends(60)], clock_offset_ms=10_000.0)
    finding = judge(ahead, canary=True)
    assert finding.verdict is Verdict.PASS
    assert finding.evidence["clock"] == "offset"
    assert finding.evidence["floor_lag_ms"] is None
    holds = holds_of(ahead)
    assert holds is not None and max(holds.holds_ms) < 0.01


def test_canary_against_a_server_without_send_times_judges_blind_and_says_so() -> None:
    tl = timeline([(s + 1.0, [s]) for s in sends(60)], stamped=False)
    finding = judge(tl, canary=True)
    assert finding.verdict is Verdict.PASS
    assert "does not look like promptpath serve" in str(finding.evidence["canary_note"])
    assert "added_delay_ms" not in finding.evidence


def test_canary_whole_delivery_fails_even_if_holds_are_modest() -> None:
    finding = judge(whole(n=30, every_ms=15.0), canary=True)
    assert finding.verdict is Verdict.FAIL
    assert finding.evidence["pattern"] == "whole"


@pytest.mark.parametrize(
    "tl",
    [streamed(), flushed(60, 13), whole(), streamed(n=5)],
    ids=["streamed", "bursts", "whole", "thin"],
)
@pytest.mark.parametrize("canary", [False, True])
def test_evidence_is_json_with_the_required_keys(tl: Timeline, canary: bool) -> None:
    finding = judge(tl, canary=canary)
    data = json.loads(json.dumps(finding.as_dict()))
    for key in ("pattern", "bursts", "burst_bytes", "silences_ms", "header_hints", "mode"):
        assert key in data["evidence"]
    assert data["probe"] == "buffering"
