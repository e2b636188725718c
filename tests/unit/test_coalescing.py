"""Path coalescing against read-loop batching, on synthetic reads: pure, exact."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from promptpath.core.coalescing import coalescing
from promptpath.core.timeline import Read, StreamEvent, Timeline

MS = 1_000_000
T0_UNIX = 1_800_000_000_000_000_000


def reads(groups: Sequence[tuple[float, Sequence[float]]], *, stamped: bool) -> Timeline:
    """Each group is one socket read: (arrival ms, [server send ms of each event in it])."""
    tl = Timeline(t0_ns=0, t0_unix_ns=T0_UNIX)
    for i, (arrival, sends) in enumerate(groups):
        tl.reads.append(Read(int(arrival * MS), 320 * max(1, len(sends))))
        for sent in sends:
            tl.events.append(
                StreamEvent(
                    t_ns=int(arrival * MS),
                    kind="content",
                    server_sent_unix_ns=T0_UNIX + int(sent * MS) if stamped else None,
                    read_index=i,
                )
            )
    return tl


def clean_fast_path(rate: float, n: int = 400) -> list[tuple[float, list[float]]]:
    """A clean path at ``rate``/s whose reader catches every fifth pair in one read, as at
    1,000 tokens/s on loopback: the second event arrives 40 µs behind the first."""
    every = 1000.0 / rate
    groups: list[tuple[float, list[float]]] = [(0.0, [])]  # the headers' read
    for i in range(0, n, 5):
        t = 10.0 + i * every
        groups += [(t + k * every + 0.2, [t + k * every]) for k in range(3)]
        groups.append((t + 3 * every + 0.24, [t + 3 * every, t + 3 * every + 0.04]))
    return groups


@pytest.mark.parametrize("stamped", [True, False], ids=["send_times", "arrival"])
@pytest.mark.parametrize("rate", [100.0, 1000.0])
def test_a_clean_fast_path_has_no_path_coalescing(rate: float, stamped: bool) -> None:
    c = coalescing(reads(clean_fast_path(rate), stamped=stamped))
    assert c.path == 0
    assert c.read_loop == 80
    assert c.judged_by == ("send_times" if stamped else "arrival")


@pytest.mark.parametrize("stamped", [True, False], ids=["send_times", "arrival"])
@pytest.mark.parametrize("rate", [10.0, 20.0, 50.0, 100.0])
def test_a_buffer_delivering_13_events_per_read_is_path_coalescing(
    rate: float, stamped: bool
) -> None:
    every = 1000.0 / rate
    groups: list[tuple[float, list[float]]] = [(0.0, [])]
    for block in range(5):
        sends = [(block * 13 + k) * every for k in range(13)]
        groups.append((sends[-1] + 1.0, sends))
    c = coalescing(reads(groups, stamped=stamped))
    assert c.path == 5 * 12 and c.read_loop == 0
    assert sum(c.path_flags) == c.path and len(c.path_flags) == 65


def test_send_times_tell_a_late_read_of_events_sent_together_from_a_held_one() -> None:
    # Both reads came 300 ms after the one before; only the send stamps can tell that the
    # first pair was sent together (the origin's write) and the second 50 ms apart.
    groups = [(0.0, []), (300.0, [299.0, 299.1]), (600.0, [549.0, 599.0])]
    c = coalescing(reads(groups, stamped=True))
    assert (c.path, c.read_loop) == (1, 1)
    assert c.path_flags == (False, False, False, True)
    blind = coalescing(reads(groups, stamped=False))
    assert (blind.path, blind.read_loop) == (2, 0)


def test_events_in_separate_reads_are_not_coalesced_at_all() -> None:
    c = coalescing(reads([(0.0, []), (100.0, [99.0]), (200.0, [199.0])], stamped=False))
    assert (c.path, c.read_loop) == (0, 0)


@pytest.mark.parametrize("groups", [[], [(0.0, []), (100.0, [99.0])]], ids=["none", "one"])
def test_a_stream_of_one_event_or_none_has_nothing_coalesced(
    groups: list[tuple[float, list[float]]],
) -> None:
    c = coalescing(reads(groups, stamped=False))
    assert (c.path, c.read_loop) == (0, 0)


@pytest.mark.parametrize("stamped", [True, False], ids=["send_times", "arrival"])
def test_a_merge_our_own_wait_for_a_cpu_explains_is_the_read_loops(stamped: bool) -> None:
    # 1,000 tokens/s; our process then waits 30 ms for a CPU and the 30 events sent
    # meanwhile merge in its receive queue, stamped with the last one's arrival
    # (net/schedwait.py, seen with a SCHED_FIFO hog on the client's core).
    groups: list[tuple[float, list[float]]] = [(0.0, [])]
    groups += [(10.0 + k + 0.1, [10.0 + k]) for k in range(20)]
    burst = [30.0 + k for k in range(30)]
    groups.append((burst[-1] + 0.1, burst))
    groups += [(60.0 + k + 0.1, [60.0 + k]) for k in range(20)]
    tl = reads(groups, stamped=stamped)
    assert coalescing(tl).path == 29  # as the stamps alone read it: a hop held them
    merged = 21  # the burst's read
    tl.reads[merged] = Read(tl.reads[merged].t_ns, tl.reads[merged].nbytes, waited_ns=30 * MS)
    c = coalescing(tl)
    assert (c.path, c.read_loop) == (0, 29)
    # A wait shorter than the hold leaves the hop's part standing.
    tl.reads[merged] = Read(tl.reads[merged].t_ns, tl.reads[merged].nbytes, waited_ns=5 * MS)
    assert coalescing(tl).path == 29
