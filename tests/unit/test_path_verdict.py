"""The path probe's reading, on hop lists built by hand: an expert's rules, one by one."""

from __future__ import annotations

import pytest

from promptpath.core.findings import Verdict
from promptpath.probes.mtu.verdict import Attempt
from promptpath.probes.path.hops import Sample, hops_of
from promptpath.probes.path.verdict import judge, read

DEST = "192.0.2.9"


def _hop(ttl: int, who: str | None, *rtts: float | None, dest: bool = False) -> list[Sample]:
    out = []
    for rtt in rtts:
        if rtt is None:
            out.append(Sample(ttl=ttl, kind="none", responder=None, rtt_ms=None))
        else:
            kind = "synack" if dest else "time_exceeded"
            out.append(Sample(ttl=ttl, kind=kind, responder=who, rtt_ms=rtt))
    return out


def _path(*hops: list[Sample]) -> list[Sample]:
    return [s for hop in hops for s in hop]


def test_a_step_that_persists_is_blamed_where_it_starts() -> None:
    samples = _path(
        _hop(1, "10.0.0.1", 1.0, 1.1, 1.2),
        _hop(2, "10.0.0.2", 1.5, 1.4, 1.6),
        _hop(3, "10.0.0.3", 41.0, 40.5, 40.8),
        _hop(4, DEST, 41.2, 41.0, 41.5, dest=True),
    )
    reading = read(hops_of(samples, DEST))
    assert reading.biggest_step == 3
    assert 39.0 < reading.added_ms[3] < 40.0
    assert reading.deprioritised == []
    finding = judge(
        destination=DEST, port=443, tcp=samples, udp=None, connect_ms=41.0, elapsed_s=1.0
    )
    assert finding.verdict is Verdict.PASS
    assert "between hop 2 (10.0.0.2) and hop 3 (10.0.0.3)" in finding.summary


def test_a_hop_slow_alone_deprioritises_its_icmp_and_is_not_the_step() -> None:
    samples = _path(
        _hop(1, "10.0.0.1", 1.0, 1.0, 1.0),
        _hop(2, "10.0.0.2", 80.0, 95.0, 70.0),  # slow, but nobody after it is
        _hop(3, "10.0.0.3", 5.0, 5.2, 5.1),
        _hop(4, DEST, 5.3, 5.2, 5.4, dest=True),
    )
    reading = read(hops_of(samples, DEST))
    assert reading.deprioritised == [2]
    assert reading.biggest_step == 3  # the 4 ms that persist start after r2, not at it
    assert 2 not in reading.added_ms


def test_loss_counts_against_the_path_only_when_it_reaches_the_destination() -> None:
    lossy_hop = _path(
        _hop(1, "10.0.0.1", 1.0, None, None),
        _hop(2, DEST, 2.0, 2.1, 2.0, dest=True),
    )
    assert read(hops_of(lossy_hop, DEST)).deprioritised == [1]
    assert (
        judge(
            destination=DEST, port=443, tcp=lossy_hop, udp=None, connect_ms=None, elapsed_s=1.0
        ).verdict
        is Verdict.PASS
    )
    lossy_path = _path(
        _hop(1, "10.0.0.1", 1.0, None, 1.0),
        _hop(2, DEST, 2.0, None, 2.0, dest=True),
    )
    finding = judge(
        destination=DEST, port=443, tcp=lossy_path, udp=None, connect_ms=None, elapsed_s=1.0
    )
    assert finding.verdict is Verdict.WARN
    assert "33% of the probes to the destination were lost" in finding.summary


def test_a_destination_that_never_answers_is_a_warning_naming_the_last_hop() -> None:
    samples = _path(_hop(1, "10.0.0.1", 1.0, 1.0, 1.0), _hop(2, None, None, None, None))
    finding = judge(
        destination=DEST, port=443, tcp=samples, udp=None, connect_ms=None, elapsed_s=3.0
    )
    assert finding.verdict is Verdict.WARN
    assert "the last answer came from hop 1 (10.0.0.1)" in finding.summary


def test_a_handshake_longer_than_the_path_rtt_is_the_servers() -> None:
    samples = _path(_hop(1, DEST, 10.0, 10.2, 10.1, dest=True))
    finding = judge(
        destination=DEST, port=443, tcp=samples, udp=None, connect_ms=60.0, elapsed_s=1.0
    )
    assert "the extra 49.9 ms is the server's" in finding.summary
    assert finding.evidence["handshake"] == {
        "connect_ms": 60.0,
        "path_rtt_ms": 10.1,
        "extra_ms": 49.9,
    }


def test_a_closed_udp_port_at_the_destination_is_named() -> None:
    tcp = _path(_hop(1, DEST, 1.0, 1.0, 1.0, dest=True))
    udp = [Sample(ttl=1, kind="unreachable", responder=DEST, rtt_ms=1.0)] * 3
    finding = judge(destination=DEST, port=443, tcp=tcp, udp=udp, connect_ms=None, elapsed_s=1.0)
    assert finding.verdict is Verdict.WARN
    assert "UDP port 443 is closed at 192.0.2.9" in finding.summary


def test_the_probe_skips_with_its_reason_where_there_is_no_path_to_trace() -> None:
    import anyio

    from promptpath.core.timeline import Timeline
    from promptpath.options import RunOptions, parse_target
    from promptpath.probes.base import ProbeContext
    from promptpath.probes.path.probe import PathProbe
    from promptpath.proxies import ProxyChoice
    from promptpath.tracer.orchestrator import TraceResult

    options = RunOptions(
        target=parse_target("https://h.invalid/v1/chat/completions"), provider="openai", model="m"
    )
    never = TraceResult(options=options, timeline=Timeline(t0_ns=0, t0_unix_ns=0))
    cases = {
        "no trace ran": ProbeContext(options=options, result=None),
        "never reached an address": ProbeContext(options=options, result=never),
    }
    for reason, ctx in cases.items():
        finding = anyio.run(PathProbe().run, ctx)
        assert finding.verdict is Verdict.SKIP and reason in finding.summary
    proxied = RunOptions(
        target=options.target,
        provider="openai",
        model="m",
        proxy=ProxyChoice(scheme="http", host="127.0.0.1", port=3128, source="--proxy"),
    )
    finding = anyio.run(PathProbe().run, ProbeContext(options=proxied, result=never))
    assert finding.verdict is Verdict.SKIP and "forward proxy" in finding.summary


def test_without_linux_error_queues_it_says_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    from promptpath.net import pathtrace

    monkeypatch.setattr(pathtrace.sys, "platform", "darwin")
    assert pathtrace.recverr_available(socket.AF_INET) == (
        "needs Linux error queues (IP_RECVERR); this is darwin"
    )
    with pytest.raises(pathtrace.PathUnsupported):  # refused before any packet is sent
        pathtrace.trace_path(("127.0.0.1", 9), socket.AF_INET)


def test_probe_all_includes_path() -> None:
    from promptpath.probes.suite import select

    assert "path" in [cls.name for cls in select(["all"])]


def _attempt(mss: int | None, ok: bool, received: int = 5000) -> Attempt:
    return Attempt(
        mss=mss,
        completed=ok,
        elapsed_ms=20.0 if ok else 2000.0,
        received=received if ok else 0,
        error=None if ok else "timed out",
    )


def test_mtu_black_hole_bracketed_by_the_search() -> None:
    from promptpath.probes.mtu.verdict import judge as judge_mtu

    attempts = [
        _attempt(None, False),
        _attempt(536, True),
        _attempt(998, True),
        _attempt(1229, True),
        _attempt(1344, False),
        _attempt(1286, False),
    ]
    finding = judge_mtu(attempts, largest_working_mss=1229, headers=40)
    assert finding.verdict is Verdict.FAIL
    assert finding.evidence["path_mtu_bytes"] == {"at_least": 1269, "below": 1326}
    assert "up to MSS 1229 (packets of 1269 bytes), not at MSS 1286 (1326 bytes)" in (
        finding.summary
    )


def test_mtu_full_size_passes_and_a_dead_server_is_not_called_a_black_hole() -> None:
    from promptpath.probes.mtu.verdict import judge as judge_mtu

    ok = judge_mtu([_attempt(None, True)], largest_working_mss=None, headers=40)
    assert ok.verdict is Verdict.PASS
    dead = judge_mtu(
        [_attempt(None, False), _attempt(536, False)], largest_working_mss=None, headers=40
    )
    assert dead.verdict is Verdict.WARN and "not a path-MTU problem" in dead.summary


def test_the_quic_probe_parses_as_a_whole_long_header_every_time() -> None:
    # aioquic, under hypercorn, parses the whole long header before it answers an unknown
    # version with version negotiation; random bytes in the length field made it drop most
    # probes (seen: 1 answer in 3). Every probe must parse, at exactly 1200 bytes.
    from aioquic.buffer import Buffer
    from aioquic.quic.packet import pull_quic_header

    from promptpath.net.pathtrace import QUIC_PROBE_BYTES, quic_probe_datagram

    for _ in range(500):
        datagram = quic_probe_datagram()
        assert len(datagram) == QUIC_PROBE_BYTES
        header = pull_quic_header(Buffer(data=datagram), host_cid_length=8)
        assert header.version == 0x1A2A3A4A and header.token == b""


def test_a_sub_millisecond_path_places_nothing_below_the_measurement_floor() -> None:
    # Figures from the lab chain with no delay at all (tests/lab/test_path_probe.py): the
    # destination's median 0.5 ms above the routers' is the probe's own timing (the
    # destination's SYN/ACK and our thread's wake-up), not a link.
    samples = _path(
        _hop(1, "10.0.0.1", 0.065, 0.076, 0.209),
        _hop(2, "10.0.0.2", 0.103, 0.134, 0.155),
        _hop(3, "10.0.0.3", 0.113, 0.126, 0.145),
        _hop(4, DEST, 0.092, 0.645, 0.765, dest=True),
    )
    finding = judge(
        destination=DEST, port=443, tcp=samples, udp=None, connect_ms=None, elapsed_s=1.0
    )
    assert "most of it" not in finding.summary
    assert "nothing measurable is added at any hop" in finding.summary
    assert "below the 1.0 ms measurement floor" in finding.summary
    assert finding.evidence["measurement_floor_ms"] == 1.0
    # The same path 1.2 ms longer after hop 3: a step above the floor is placed.
    longer = [
        Sample(ttl=s.ttl, kind=s.kind, responder=s.responder, rtt_ms=(s.rtt_ms or 0) + 1.2)
        if s.ttl == 4
        else s
        for s in samples
    ]
    placed = judge(destination=DEST, port=443, tcp=longer, udp=None, connect_ms=None, elapsed_s=1)
    assert "is added between hop 3 (10.0.0.3) and hop 4 (192.0.2.9)" in placed.summary
    # Two of the destination's three probes 1.5 ms late (a busy machine's wake-ups): the
    # median steps past the floor, the fastest probe does not; noise only ever adds.
    late = [Sample(ttl=4, kind="synack", responder=DEST, rtt_ms=rtt) for rtt in (0.09, 1.6, 1.7)]
    noisy = [*(s for s in samples if s.ttl < 4), *late]
    reading = read(hops_of(noisy, DEST))
    assert reading.added_ms[4] >= 1.0 and reading.added_fastest_ms[4] < 1.0
    quiet = judge(destination=DEST, port=443, tcp=noisy, udp=None, connect_ms=None, elapsed_s=1)
    assert "nothing measurable is added at any hop" in quiet.summary


def _reached(hops: int = 4) -> list[Sample]:
    return _path(
        *(_hop(t, f"10.0.0.{t}", 1.0, 1.0, 1.0) for t in range(1, hops)),
        _hop(hops, DEST, 1.0, 1.0, 1.0, dest=True),
    )


def test_fragmentation_needed_reads_as_a_path_mtu_below_1200_after_the_hop_that_sent_it() -> None:
    # What the lab's 1100-byte r2-r3 link gives a DF datagram: time-exceeded from r1 and
    # r2 at TTL 1 and 2, then r2's "fragmentation needed" (MTU 1100) for TTL 3.
    udp = _path(_hop(1, "10.0.0.1", 1.0, 1.0, 1.0), _hop(2, "10.0.0.2", 1.0, 1.0, 1.0))
    udp += [Sample(ttl=3, kind="too_big", responder="10.0.0.2", rtt_ms=1.0, mtu=1100)] * 3
    finding = judge(
        destination=DEST, port=443, tcp=_reached(), udp=udp, connect_ms=None, elapsed_s=1.0
    )
    assert finding.verdict is Verdict.WARN
    assert (
        "the path MTU is below 1200-byte UDP datagrams after hop 2 (10.0.0.2): the next link"
        " carries packets of at most 1100 bytes (ICMP 'fragmentation needed'), a 1200-byte"
        " datagram is a 1228-byte packet"
    ) in finding.summary
    assert "get through" not in finding.summary and "UDP is filtered" not in finding.summary
    quic = finding.evidence["udp"]
    assert isinstance(quic, dict)
    assert quic["path_mtu"] == {"after_hop": 2, "responder": "10.0.0.2", "bytes": 1100}
    assert quic["quic_answered"] is False and quic["dont_fragment"] is True
    assert [h["ttl"] for h in quic["hops"]] == [1, 2]  # the "too big" answers are not a hop
    assert any("raise the MTU of the link after hop 2" in a for a in finding.advice)


def test_a_datagram_this_hosts_own_route_refuses_is_named_so() -> None:
    udp = [Sample(ttl=1, kind="too_big", responder=None, rtt_ms=None, mtu=1100)] * 3
    finding = judge(
        destination=DEST, port=443, tcp=_reached(), udp=udp, connect_ms=None, elapsed_s=1.0
    )
    assert finding.verdict is Verdict.WARN
    assert "below 1200-byte UDP datagrams on this host's own route" in finding.summary
    assert "at most 1100 bytes (EMSGSIZE)" in finding.summary
