"""The path probe's reading, on hop lists built by hand: an expert's rules, one by one."""

from __future__ import annotations

import pytest

from promptpath.core.findings import Verdict
from promptpath.probes.mtu.verdict import Attempt
from promptpath.probes.path.verdict import Sample, hops_of, judge, read

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
