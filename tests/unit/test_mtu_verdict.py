"""Where a path-MTU black hole is: full-size DF probes beside small ones, read by hand-built
traces (the shapes the lab chain gave, tests/lab/test_path_probe.py)."""

from __future__ import annotations

from promptpath.core.findings import Verdict
from promptpath.probes.mtu.verdict import Attempt, judge, place
from promptpath.probes.path.hops import Kind, Sample

DEST = "192.0.2.9"
ROUTERS = ("10.0.1.2", "10.0.2.2", "10.0.3.2")


def _answers(ttl: int, who: str, kind: Kind = "time_exceeded", **extra: int) -> list[Sample]:
    return [Sample(ttl=ttl, kind=kind, responder=who, rtt_ms=0.1, **extra)] * 2


def _silent(ttl: int) -> list[Sample]:
    return [Sample(ttl=ttl, kind="none", responder=None, rtt_ms=None)] * 2


def _small() -> list[Sample]:
    """SYNs: every router, then the destination's SYN/ACK at TTL 4."""
    out = [s for t, r in enumerate(ROUTERS, 1) for s in _answers(t, r)]
    return out + _answers(4, DEST, "synack")


def test_fragmentation_needed_from_a_router_places_the_narrow_link_after_it() -> None:
    # r2 (hop 2) cannot forward 1297 bytes onto its 1280-byte link: TTL 1 and 2 are
    # answered as usual (a router checks the TTL before the size), TTL 3 draws r2's ICMP.
    big = [*_answers(1, ROUTERS[0]), *_answers(2, ROUTERS[1])]
    big += _answers(3, ROUTERS[1], "too_big", mtu=1280)
    where = place(big, _small(), DEST, packet_bytes=1297)
    assert (where.after_hop, where.by, where.mtu, where.responder) == (2, "icmp", 1280, ROUTERS[1])
    assert where.before_hop is not None and where.before_hop.ttl == 3
    assert where.sentence.startswith(
        "1297-byte packets toward the server stop after hop 2 (10.0.2.2), before hop 3"
        " (10.0.3.2): the link there carries at most 1280 bytes"
    )
    assert "taught this host the path MTU" in where.sentence


def test_with_that_icmp_filtered_too_silence_past_a_hop_small_probes_pass_places_it() -> None:
    big = [*_answers(1, ROUTERS[0]), *_answers(2, ROUTERS[1]), *_silent(3), *_silent(4)]
    where = place(big, _small(), DEST, packet_bytes=1297)
    assert (where.after_hop, where.by, where.mtu) == (2, "silence", None)
    assert where.as_dict()["before_hop"] == 3
    assert (
        "1297-byte packets toward the server get no answer past hop 2 (10.0.2.2) while small"
        " ones are answered by hop 3 (10.0.3.2): the path narrows after it"
    ) in where.sentence


def test_a_silent_router_is_not_mistaken_for_the_narrow_link() -> None:
    # Hop 2 answers nothing at all; full-size probes are answered again at hop 3, so
    # they got past it: the narrowing is after hop 3.
    small = [*_answers(1, ROUTERS[0]), *_silent(2), *_answers(3, ROUTERS[2])]
    small += _answers(4, DEST, "synack")
    big = [*_answers(1, ROUTERS[0]), *_silent(2), *_answers(3, ROUTERS[2]), *_silent(4)]
    where = place(big, small, DEST, packet_bytes=1500)
    assert where.after_hop == 3 and where.by == "silence"


def test_full_size_packets_that_arrive_leave_the_black_hole_on_the_way_back() -> None:
    big = [*_answers(1, ROUTERS[0]), *_answers(2, DEST, "unreachable")]
    where = place(big, _small(), DEST, packet_bytes=1500)
    assert where.after_hop is None and where.by is None
    assert "the black hole is on the way back only" in where.sentence


def test_probes_that_stop_at_the_same_hop_place_nothing() -> None:
    small = [*_answers(1, ROUTERS[0]), *_silent(2)]
    big = [*_answers(1, ROUTERS[0]), *_silent(2)]
    where = place(big, small, DEST, packet_bytes=1500)
    assert where.after_hop is None and "cannot be told from here" in where.sentence


def test_this_hosts_own_route_refusing_the_size_is_said_as_such() -> None:
    big = [Sample(ttl=1, kind="too_big", responder=None, rtt_ms=None, mtu=1400)]
    where = place(big, _small(), DEST, packet_bytes=1500)
    assert (where.after_hop, where.by, where.mtu) == (0, "local", 1400)


def _attempt(mss: int | None, ok: bool) -> Attempt:
    return Attempt(
        mss=mss,
        completed=ok,
        elapsed_ms=20.0 if ok else 2000.0,
        received=5000 if ok else 0,
        error=None if ok else "timed out",
    )


def test_the_black_hole_finding_names_where_it_is_beside_its_size() -> None:
    attempts = [_attempt(None, False), _attempt(536, True), _attempt(1229, True)]
    attempts.append(_attempt(1257, False))
    big = [*_answers(1, ROUTERS[0]), *_answers(2, ROUTERS[1])]
    big += _answers(3, ROUTERS[1], "too_big", mtu=1280)
    where = place(big, _small(), DEST, packet_bytes=1297)
    finding = judge(attempts, largest_working_mss=1229, headers=40, location=where)
    assert finding.verdict is Verdict.FAIL
    assert "not at MSS 1257 (1297 bytes)" in finding.summary
    assert "packets toward the server stop after hop 2 (10.0.2.2)" in finding.summary
    assert finding.evidence["location"] == {
        "packet_bytes": 1297,
        "after_hop": 2,
        "before_hop": 3,
        "responder": ROUTERS[1],
        "mtu": 1280,
        "by": "icmp",
    }
