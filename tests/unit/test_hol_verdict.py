"""The hol probe's pure parts: stalls, co-stall shares and episodes from arrival stamps,
the verdict from measured groups, its cost and the spend check before the run."""

from __future__ import annotations

import dataclasses

import pytest

from promptpath.core.errors import UsageError
from promptpath.core.findings import Verdict
from promptpath.plan.plan import Plan
from promptpath.plan.resolve import resolve
from promptpath.probes.base import ProbeContext
from promptpath.probes.hol.measure import (
    MIN_FLOOR_MS,
    GroupMeasure,
    Stream,
    cadence_ms,
    co_stall_shares,
    episodes,
    floor_ms,
    measure_group,
    pauses,
    stall_threshold_ms,
)
from promptpath.probes.hol.probe import HolProbe, cannot_measure, http3_plan
from promptpath.probes.hol.verdict import HolMeasure, is_head_of_line, judge, retransmission_ms
from promptpath.probes.settings import HolSettings

pytestmark = pytest.mark.unit

MS = 1_000_000
CADENCE = 20  # ms between tokens
THRESHOLD = 40.0  # the 20 ms cadence + half a 40 ms round trip


def paced(count: int = 50, *, holds: dict[int, int] | None = None, start: int = 0) -> Stream:
    """A stream of ``count`` arrivals every CADENCE ms; ``holds`` {token: ms} delays
    token k and every later one by that many ms (a stall before token k)."""
    holds = holds or {}
    times, shift = [], 0
    for k in range(count):
        shift += holds.get(k, 0)
        times.append((start + k * CADENCE + shift) * MS)
    return Stream(times=tuple(times))


def test_a_stall_is_a_gap_over_the_threshold_and_an_on_time_stream_has_none() -> None:
    assert paced().stalls(THRESHOLD) == []
    held = paced(holds={10: 50})  # token 10 comes 70 ms after token 9
    assert [(b - a) / MS for a, b in held.stalls(THRESHOLD)] == [70.0]
    # A gap exactly at the threshold is not over it.
    assert paced(holds={10: 20}).stalls(THRESHOLD) == []


def test_one_loss_on_a_shared_connection_stalls_every_stream_together() -> None:
    # Head-of-line blocking: every stream held over the same interval.
    streams = [paced(holds={10: 50, 30: 45}, start=i) for i in range(4)]
    shares = co_stall_shares(streams, THRESHOLD)
    assert shares == [1.0] * 8
    assert episodes(streams, THRESHOLD) == [4, 4]


def test_losses_on_separate_connections_stall_one_stream_each() -> None:
    streams = [paced(holds={5 + 10 * i: 50}) for i in range(4)]
    assert co_stall_shares(streams, THRESHOLD) == [0.0] * 4
    assert episodes(streams, THRESHOLD) == [1, 1, 1, 1]


def test_a_co_stall_share_counts_the_other_streams_that_overlapped() -> None:
    # Streams 0 and 1 stall over the same tokens, stream 2 later, stream 3 never.
    streams = [
        paced(holds={10: 50}),
        paced(holds={10: 60}),
        paced(holds={30: 50}),
        paced(),
    ]
    assert co_stall_shares(streams, THRESHOLD) == [1 / 3, 1 / 3, 0.0]
    assert sorted(episodes(streams, THRESHOLD)) == [1, 2]


def test_one_stream_has_no_co_stall_share() -> None:
    assert co_stall_shares([paced(holds={10: 50})], THRESHOLD) == []


def test_a_pause_is_where_every_stream_of_every_group_stalled_at_once() -> None:
    shared = [paced(holds={10: 50, 30: 50}, start=i) for i in range(4)]
    separate = [paced(holds={10: 60}, start=i) for i in range(4)]
    # Token 10 was late on all eight streams: one pause, where all their stalls overlap
    # (from the latest stall's start to the earliest stall's end).
    (span,) = pauses([*shared, *separate], THRESHOLD)
    assert span == (9 * CADENCE * MS + 3 * MS, (10 * CADENCE + 50) * MS)
    assert pauses(shared[:1], THRESHOLD) == []  # one stream: nothing to agree on
    assert pauses([paced(holds={10: 50}), paced(holds={10: 50}, start=200)], THRESHOLD) == []
    g = measure_group(
        "separate", separate, THRESHOLD, http_version="HTTP/2", connections=4, exclude=[span]
    )
    assert g.stalls == 0 and g.paused == 4 and g.co_stall is None
    s = measure_group(
        "shared", shared, THRESHOLD, http_version="HTTP/2", connections=1, exclude=[span]
    )
    assert s.stalls == 4 and s.paused == 4 and s.held == (4,)


def test_the_floor_is_half_a_round_trip_and_never_below_its_minimum() -> None:
    assert floor_ms(40.0) == 20.0
    assert floor_ms(0.05) == MIN_FLOOR_MS
    assert floor_ms(None) == MIN_FLOOR_MS
    assert stall_threshold_ms(20.0, 40.0) == 40.0


def test_the_measured_cadence_is_the_median_gap() -> None:
    assert cadence_ms([paced(), paced(holds={10: 300})]) == 20.0
    assert cadence_ms([Stream(times=(1,))]) is None


def test_a_group_measure_says_its_stalls_range_and_episodes() -> None:
    streams = [paced(holds={10: 50}, start=i) for i in range(4)]
    g = measure_group("shared", streams, THRESHOLD, http_version="HTTP/2", connections=1)
    d = g.as_dict()
    assert d["stalls"] == 4 and d["episodes"] == 1 and d["episodes_all_streams"] == 1
    assert d["co_stall"] == 1.0 and d["stall_min_ms"] == d["stall_max_ms"] == 70.0
    assert d["arrivals"] == 200 and d["gap_p50_ms"] == 20.0 and d["gap_max_ms"] == 70.0


def group(
    label: str,
    holds: list[dict[int, int]],
    *,
    version: str | None = "HTTP/2",
    count: int = 50,
    connections: int = 1,
) -> GroupMeasure:
    streams = [paced(count, holds=h, start=i) for i, h in enumerate(holds)]
    return measure_group(label, streams, THRESHOLD, http_version=version, connections=connections)


def hol(
    shared: GroupMeasure, separate: GroupMeasure, http3: GroupMeasure | None = None
) -> HolMeasure:
    return HolMeasure(
        streams=shared.streams,
        shared=shared,
        separate=separate,
        http3=http3,
        http3_note=None if http3 is not None else "the endpoint did not offer it",
        cadence_ms=20.0,
        cadence_source="canary",
        floor_ms=20.0,
        rtt_ms=40.0,
        threshold_ms=THRESHOLD,
    )


TOGETHER = [{10: 50, 20: 60, 30: 45, 40: 55}] * 4
APART = [{5: 50}, {15: 50}, {}, {35: 55}]


def test_stalls_that_hit_every_shared_stream_and_not_the_separate_ones_are_head_of_line() -> None:
    m = hol(group("shared", TOGETHER), group("separate", APART, connections=4))
    finding = judge(m)
    assert finding.verdict is Verdict.WARN
    assert is_head_of_line(m)
    assert finding.summary.startswith(
        "head-of-line blocking: 4 stalls of 65–80 ms hit all 4 streams of the shared HTTP/2"
        " connection at once (co-stall 1.00); separate connections 0.00: one lost segment"
        " holds back every stream (loss on this path)"
    ), finding.summary
    assert finding.evidence["head_of_line"] is True
    assert finding.lead_words == "head-of-line blocking on the shared HTTP/2 connection"


def test_stalls_that_held_some_of_the_shared_streams_together_are_counted_and_said() -> None:
    # A retransmission about a round trip long leaves some streams' gaps just under the
    # threshold: the last stall held three of the four.
    some = [{10: 50, 20: 50, 30: 50, 40: 50}] * 3 + [{10: 50, 20: 50, 30: 50}]
    finding = judge(hol(group("shared", some), group("separate", APART, connections=4)))
    assert finding.verdict is Verdict.WARN
    assert finding.summary.startswith(
        "head-of-line blocking: 4 stalls of 70 ms hit 3–4 of the 4 streams of the shared"
        " HTTP/2 connection at once (co-stall 0.93)"
    ), finding.summary


def test_http3_figures_join_the_finding_and_its_advice_when_it_lost_less() -> None:
    m = hol(
        group("shared", TOGETHER),
        group("separate", APART, connections=4),
        group("http3", [{5: 50}, {}, {}, {}], version="HTTP/3"),
    )
    finding = judge(m)
    assert "; HTTP/3 0.00" in finding.summary
    assert any("QUIC retransmits per stream" in a for a in finding.advice)


def test_separate_connections_without_any_stall_still_contrast() -> None:
    finding = judge(hol(group("shared", TOGETHER), group("separate", [{}] * 4)))
    assert finding.verdict is Verdict.WARN
    assert "separate connections no stall" in finding.summary


def test_a_pause_of_everything_is_left_out_of_both_groups() -> None:
    shared = [paced(holds={5: 50, 10: 50, 20: 60, 30: 45, 40: 55}, start=i) for i in range(4)]
    separate = [paced(holds={5: 60}, start=i) for i in range(4)]
    span = pauses([*shared, *separate], THRESHOLD)
    m = hol(
        measure_group(
            "shared", shared, THRESHOLD, http_version="HTTP/2", connections=1, exclude=span
        ),
        measure_group(
            "separate", separate, THRESHOLD, http_version="HTTP/2", connections=4, exclude=span
        ),
    )
    m = dataclasses.replace(m, pauses_ms=tuple((b - a) / 1e6 for a, b in span))
    finding = judge(m)
    assert finding.verdict is Verdict.WARN
    assert finding.summary.startswith("head-of-line blocking: 4 stalls of 65–80 ms hit all 4")
    assert "1 pause that held every stream of both groups at once" in finding.summary
    assert finding.evidence["separate"]["stalls_in_pauses"] == 4  # type: ignore[index]


def test_stalls_together_shorter_than_a_round_trip_are_not_a_lost_segment() -> None:
    # Four episodes held every shared stream, but none lasted a round trip beyond the
    # cadence (gaps of 45-50 ms against 20 + 40 - 5): a connection waiting for a CPU at
    # one end, which a retransmission cannot be.
    short = [{10: 25, 20: 30, 30: 25, 40: 30}] * 4
    m = hol(group("shared", short), group("separate", [{}] * 4))
    assert m.shared.co_stall == 1.0 and len(m.shared.together) == 4
    assert retransmission_ms(m) == 55.0
    finding = judge(m)
    assert finding.verdict is Verdict.PASS
    assert finding.evidence["retransmission_ms"] == 55.0


def test_three_episodes_are_not_enough_to_call_it() -> None:
    # One connection's streams also stall together when its processing waits for a CPU.
    m = hol(group("shared", [{10: 50, 20: 50, 30: 50}] * 4), group("separate", [{}] * 4))
    assert judge(m).verdict is Verdict.PASS


def test_stalls_that_hold_the_separate_connections_together_too_are_not_blamed_on_sharing() -> None:
    finding = judge(hol(group("shared", TOGETHER), group("separate", TOGETHER)))
    assert finding.verdict is Verdict.PASS
    assert finding.summary.startswith("no head-of-line blocking told apart")


def test_a_clean_path_passes_with_the_figures() -> None:
    finding = judge(hol(group("shared", [{}] * 4), group("separate", [{}] * 4)))
    assert finding.verdict is Verdict.PASS
    assert finding.summary.startswith(
        "no stalls: 4 streams on one HTTP/2 connection: no stall; 4 on separate connections:"
        " no stall"
    ), finding.summary
    assert "a gap over 40 ms, the 20 ms cadence (asked of the canary) plus 20 ms" in (
        finding.summary
    )
    assert "HTTP/3 not measured: the endpoint did not offer it" in finding.summary


def test_stalls_on_single_streams_pass_as_no_head_of_line_blocking() -> None:
    finding = judge(hol(group("shared", APART), group("separate", APART)))
    assert finding.verdict is Verdict.PASS
    assert finding.summary.startswith("no head-of-line blocking: the shared connection's")


def test_stalls_only_on_http3_say_the_shared_connection_had_none() -> None:
    m = hol(
        group("shared", [{}] * 4),
        group("separate", [{}] * 4),
        group("http3", TOGETHER, version="HTTP/3"),
    )
    finding = judge(m)
    assert finding.verdict is Verdict.PASS
    assert finding.summary.startswith(
        "no head-of-line blocking: no stall on the shared HTTP/2 connection;"
    ), finding.summary
    assert "HTTP/3: 16 stalls of 65–80 ms, co-stall 1.00" in finding.summary


def test_an_http11_answer_is_not_judged() -> None:
    finding = judge(hol(group("shared", [{}] * 4, version="HTTP/1.1"), group("separate", [{}] * 4)))
    assert finding.verdict is Verdict.SKIP
    assert "HTTP/1.1" in finding.summary


def test_streams_delivered_in_a_few_blocks_are_not_judged() -> None:
    finding = judge(hol(group("shared", [{}] * 4, count=3), group("separate", [{}] * 4)))
    assert finding.verdict is Verdict.SKIP
    assert "fewer than 8 each" in finding.summary


def test_streams_that_all_failed_are_an_error() -> None:
    failed = measure_group(
        "shared",
        [Stream(times=(), ok=False)] * 4,
        THRESHOLD,
        http_version=None,
        connections=1,
        error="connect: connection refused",
    )
    finding = judge(hol(failed, failed))
    assert finding.verdict is Verdict.ERROR
    assert "connection refused" in finding.summary


# -- the probe's plan: which targets, which groups, what it costs ----------------------
def _plan(target: str = "https://api.example.com/v1/chat/completions", **given: object) -> Plan:
    return resolve({"target": target, "probe": ["hol"], **given}, environ={})


def _cost(plan: Plan) -> tuple[int, int]:
    cost = HolProbe().cost(
        ProbeContext(options=plan.trace, result=None, settings=plan.probe_settings)
    )
    return cost.requests, cost.tokens


def test_its_cost_is_two_groups_of_n_and_a_third_when_http3_may_run() -> None:
    assert _cost(_plan()) == (12, 12 * 64)
    assert _cost(_plan(hol_streams=3)) == (9, 9 * 64)
    cleartext = _plan("http://127.0.0.1:8080/v1/chat/completions", http="2")
    assert _cost(cleartext) == (8, 8 * 64)


def test_above_the_spend_threshold_it_asks_for_yes_unless_loopback() -> None:
    with pytest.raises(UsageError) as raised:
        _plan(hol_streams=8)  # 24 requests to a remote host
    assert "add --yes" in raised.value.message and "24 requests" in raised.value.message
    _plan(hol_streams=8, yes=True)
    said: list[str] = []
    resolve(
        {
            "target": "https://localhost:8443/v1/chat/completions",
            "probe": ["hol"],
            "hol_streams": 8,
        },
        environ={},
        say=said.append,
    )
    assert said == ["promptpath: probes (hol): ≤24 requests, ≤1,536 tokens to loopback"]


def test_hol_streams_out_of_range_is_refused() -> None:
    for bad in (1, HolSettings.MAX_STREAMS + 1):
        with pytest.raises(UsageError, match="--hol-streams"):
            HolSettings(streams=bad)


def test_targets_it_cannot_measure_say_why() -> None:
    ws = cannot_measure(_plan("wss://h.example/v1/realtime").trace)
    assert ws is not None and "WebSocket" in ws
    cleartext = cannot_measure(_plan("http://h.example/v1/chat/completions").trace)
    assert cleartext is not None and "--http 2" in cleartext


def test_http3_runs_only_where_the_target_itself_offers_it() -> None:
    options = _plan().trace

    class Result:
        def __init__(self, h3: dict[str, object] | None) -> None:
            self.h3 = h3

    offered = {
        "advertised_by": "alt-svc",
        "host": "api.example.com",
        "port": 443,
        "authority": ":443",
    }
    elsewhere = {**offered, "port": 8443, "authority": ":8443"}
    assert http3_plan(options, Result(offered))[0] is True  # type: ignore[arg-type]
    runs, why = http3_plan(options, Result(elsewhere))  # type: ignore[arg-type]
    assert not runs and ":8443" in (why or "")
    runs, why = http3_plan(options, Result({"advertised_by": None}))  # type: ignore[arg-type]
    assert not runs and "did not offer" in (why or "")
