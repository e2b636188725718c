"""The impairer's per-direction schedule (tests/helpers/impairer.py), with time passed in."""

from __future__ import annotations

import random

from tests.helpers.impairer import QUEUE_PACKETS, Direction, Impairment

MS = 1_000_000


def _direction(seed: int = 0, **impairment: float) -> Direction:
    return Direction(Impairment(**impairment), random.Random(seed))


def test_delay_releases_each_packet_exactly_that_much_later() -> None:
    link = _direction(delay_ms=20)
    assert link.admit(b"a", 5 * MS) == 25 * MS
    assert list(link.due(25 * MS - 1)) == []
    assert list(link.due(25 * MS)) == [b"a"]


def test_jitter_spreads_releases_but_never_reorders() -> None:
    link = _direction(seed=3, delay_ms=10, jitter_ms=5)
    releases = [link.admit(bytes([i]), i * MS // 10) for i in range(200)]
    assert all(r is not None for r in releases)
    assert releases == sorted(releases)  # type: ignore[type-var]
    offsets = [r - i * MS // 10 for i, r in enumerate(releases) if r is not None]
    assert min(offsets) >= 5 * MS
    assert len(set(offsets)) > 100  # jittered, not constant
    assert list(link.due(10**12)) == [bytes([i]) for i in range(200)]


def test_loss_is_reproducible_from_the_seed_and_near_its_rate() -> None:
    def lost_indices(seed: int) -> list[int]:
        link = _direction(seed=seed, loss=0.02)
        lost = []
        for i in range(10_000):
            if link.admit(b"x", i) is None:
                lost.append(i)
            list(link.due(i))  # keep the queue from filling: only loss may drop here
        assert link.overflowed == 0
        return lost

    first = lost_indices(7)
    assert first == lost_indices(7)
    assert first != lost_indices(8)
    assert 150 <= len(first) <= 250  # 2 % of 10,000, binomial sd 14


def test_rate_limit_serialises_back_to_back_packets() -> None:
    # 1,000 bytes at 800 kbit/s take 10 ms on the wire.
    link = _direction(rate_kbit=800, delay_ms=1)
    assert [link.admit(b"x" * 1000, 0) for _ in range(3)] == [11 * MS, 21 * MS, 31 * MS]
    # An idle link starts serialising at the packet's own arrival.
    assert link.admit(b"x" * 1000, 100 * MS) == 111 * MS


def test_a_full_queue_drops_the_newest_packet() -> None:
    link = _direction(delay_ms=1)
    for _ in range(QUEUE_PACKETS):
        assert link.admit(b"x", 0) is not None
    assert link.admit(b"y", 0) is None
    assert link.overflowed == 1
    assert len(list(link.due(MS))) == QUEUE_PACKETS
    assert link.forwarded == QUEUE_PACKETS
