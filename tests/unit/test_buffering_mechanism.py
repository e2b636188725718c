"""Grades from the mechanism: the same hop, the same verdict, at any token rate.

Each hop is simulated byte by byte on a paced stream (events of 300-340 bytes, as the
canary's are), at 10, 20, 50 and 100 tokens/s, and judged with and without send stamps.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from promptpath.core.findings import Finding, Verdict
from promptpath.probes.buffering.mechanism import TIMER_FAIL_MS
from promptpath.probes.buffering.verdict import judge
from tests.unit.test_buffering_verdict import timeline

RATES = (10.0, 20.0, 50.0, 100.0)
Groups = list[tuple[float, list[float]]]
Hop = Callable[[float, int], tuple[Groups, list[int]]]
EVENTS = 120  # as many as the hand checks of nginx asked for


def paced(rate: float, n: int) -> list[tuple[float, int]]:
    """(send ms, bytes) of each of ``n`` events of a stream paced at ``rate``."""
    every = 1000.0 / rate
    # Sizes vary without a short period, so no run of events adds up to the same bytes.
    return [(10.0 + i * every, 300 + i * 2654435761 % 41) for i in range(n)]


def size_buffer(block: int, head: int = 0) -> Hop:
    """A buffer that hands over exactly ``block`` bytes whenever it holds that many (the
    first block ``head`` bytes short: nginx's first buffer also held the upstream's
    headers), and the rest at the end."""

    def hop(rate: float, n: int) -> tuple[Groups, list[int]]:
        groups: Groups = []
        sizes: list[int] = []
        done = 0  # body bytes handed over
        limit = block - head
        ends: list[tuple[int, float]] = []  # (end offset, send ms) of each event
        offset = 0
        for sent, nbytes in paced(rate, n):
            offset += nbytes
            ends.append((offset, sent))
            while offset - done >= limit:
                done += limit
                complete = [s for end, s in ends if end <= done]
                ends = [(end, s) for end, s in ends if end > done]
                groups.append((sent + 1.0, complete))
                sizes.append(limit)
                limit = block
        groups.append((ends[-1][1] + 1.0, [s for _, s in ends]))
        sizes.append(offset - done)
        return groups, sizes

    return hop


def timer(every_ms: float) -> Hop:
    """A flush timer started by the first event into an empty buffer (haproxy's 200 ms
    MSG_MORE cork, measured: the first event of each delivery held 200 ms)."""

    def hop(rate: float, n: int) -> tuple[Groups, list[int]]:
        groups: Groups = []
        sizes: list[int] = []
        batch: list[tuple[float, int]] = []
        for sent, nbytes in paced(rate, n):
            if batch and sent > batch[0][0] + every_ms:
                groups.append((batch[0][0] + every_ms + 1.0, [s for s, _ in batch]))
                sizes.append(sum(b for _, b in batch))
                batch = []
            batch.append((sent, nbytes))
        groups.append((batch[-1][0] + 1.0, [s for s, _ in batch]))
        sizes.append(sum(b for _, b in batch))
        return groups, sizes

    return hop


def whole(rate: float, n: int) -> tuple[Groups, list[int]]:
    events = paced(rate, n)
    return [(events[-1][0] + 2.0, [s for s, _ in events])], [sum(b for _, b in events)]


def clean(rate: float, n: int) -> tuple[Groups, list[int]]:
    """Each event as sent; every fifth one the origin writes 40 µs behind the one before
    (catching up its pacing) and our reader takes both in one read, as measured at 1,000
    tokens/s on loopback."""
    groups: Groups = []
    sizes: list[int] = []
    for i, (sent, nbytes) in enumerate(paced(rate, n)):
        if i % 5 == 4:
            prev = groups[-1][1][-1]
            groups[-1][1].append(prev + 0.04)
            sizes[-1] += nbytes
            continue
        groups.append((sent + 0.3, [sent]))
        sizes.append(nbytes)
    return groups, sizes


def judged(
    hop: Hop,
    rate: float,
    *,
    canary: bool,
    headers: tuple[tuple[str, str], ...] = (),
    n: int = EVENTS,
) -> Finding:
    groups, sizes = hop(rate, n)
    tl = timeline(groups, read_bytes=sizes, stamped=canary)
    tl.response_headers += list(headers)
    return judge(tl, canary=canary)


def mechanism(f: Finding) -> dict[str, object]:
    m = f.evidence["mechanism"]
    assert isinstance(m, dict), f.summary
    return m


@pytest.mark.parametrize("canary", [True, False], ids=["canary", "blind"])
@pytest.mark.parametrize("rate", RATES)
def test_a_4kib_buffer_fails_at_every_rate_and_says_so(rate: float, canary: bool) -> None:
    f = judged(size_buffer(4096, head=213), rate, canary=canary)
    assert f.verdict is Verdict.FAIL, f.summary
    m = mechanism(f)
    assert m["kind"] == "size_buffer" and m["block_bytes"] == 4096
    assert 12 <= m["events_per_block"] <= 13  # type: ignore[operator]
    interval = m["interval_ms"]
    assert isinstance(interval, float)
    assert interval == pytest.approx(12.8 * 1000 / rate, rel=0.1)  # 4096 / 320 B a token
    assert f.evidence["pattern"] == "bursts" and f.evidence["buffer_size_bytes"] == 4096
    assert "exactly 4096 bytes" in f.summary
    assert any("proxy_buffering off" in a for a in f.advice)
    if canary:  # the first event of each block waited for the twelve behind it
        assert m["first_event_held_ms"] == pytest.approx(12 * 1000 / rate, rel=0.1)


@pytest.mark.parametrize("rate", RATES)
def test_an_8kib_buffer_fails_too(rate: float) -> None:
    f = judged(size_buffer(8192), rate, canary=False)
    assert f.verdict is Verdict.FAIL
    assert mechanism(f)["block_bytes"] == 8192


@pytest.mark.parametrize("canary", [True, False], ids=["canary", "blind"])
@pytest.mark.parametrize("rate", RATES)
def test_a_200ms_timer_warns_at_every_rate(rate: float, canary: bool) -> None:
    f = judged(timer(200.0), rate, canary=canary)
    assert f.verdict is Verdict.WARN, f.summary
    m = mechanism(f)
    assert m["kind"] == "time_coalescing"
    # A delivery every timer + one token interval: the timer starts at the next event.
    interval = m["interval_ms"]
    assert isinstance(interval, float)
    assert interval == pytest.approx(200.0 + 1000 / rate, abs=2.0)
    assert any("http-no-delay" in a for a in f.advice)
    if canary:
        assert m["first_event_held_ms"] == pytest.approx(200.0, abs=1000 / rate)


def test_a_timer_stays_a_timer_when_a_few_deliveries_come_late() -> None:
    # As a loaded CI client read haproxy's 250 ms cork: 2 of 20 deliveries late (a missed
    # tick, ~500 ms, and one read 170 ms late), the rest on the beat.
    beats = [250.0 * k for k in range(1, 21) if k != 7]
    beats[11] += 170.0
    f = judged(irregular(beats), 20.0, canary=False)
    m = mechanism(f)
    assert m["kind"] == "time_coalescing", f.summary
    assert m["interval_ms"] == pytest.approx(250.0, abs=5.0)
    assert f.verdict is Verdict.WARN


def test_a_beat_lost_more_than_a_quarter_of_the_time_is_no_timer() -> None:
    beats = [250.0, 500.0, 900.0, 1150.0, 1400.0, 1800.0, 2050.0, 2300.0, 2700.0, 2950.0]
    m = mechanism(judged(irregular(beats), 20.0, canary=False))
    assert m["kind"] == "irregular_bursts"


@pytest.mark.parametrize("rate", RATES)
def test_a_timer_of_a_second_fails_at_every_rate(rate: float) -> None:
    f = judged(timer(1000.0), rate, canary=False, n=int(rate * 6))  # 5 flushes or more
    assert f.verdict is Verdict.FAIL, f.summary
    m = mechanism(f)
    assert m["kind"] == "time_coalescing"
    assert isinstance(m["interval_ms"], float) and m["interval_ms"] >= TIMER_FAIL_MS


@pytest.mark.parametrize("canary", [True, False], ids=["canary", "blind"])
@pytest.mark.parametrize("rate", RATES)
def test_whole_response_delivery_fails_at_every_rate(rate: float, canary: bool) -> None:
    f = judged(whole, rate, canary=canary)
    assert f.verdict is Verdict.FAIL
    assert mechanism(f)["kind"] == "whole_response"


@pytest.mark.parametrize("rate", RATES)
def test_compression_holding_events_back_fails_and_keeps_the_shape(rate: float) -> None:
    gzip = (("Content-Encoding", "gzip"),)
    f = judged(size_buffer(4096), rate, canary=True, headers=gzip)
    assert f.verdict is Verdict.FAIL
    m = mechanism(f)
    assert m["kind"] == "compression" and m["encoding"] == "gzip"
    assert m["shape"] == "size_buffer" and m["block_bytes"] == 4096


def test_a_compressed_stream_on_a_steady_timer_is_the_timer() -> None:
    f = judged(timer(200.0), 20.0, canary=True, headers=(("Content-Encoding", "gzip"),))
    assert f.verdict is Verdict.WARN
    m = mechanism(f)
    assert m["kind"] == "time_coalescing" and m["encoding"] == "gzip"


@pytest.mark.parametrize("canary", [True, False], ids=["canary", "blind"])
@pytest.mark.parametrize("rate", (*RATES, 1000.0))
def test_a_clean_path_passes_whatever_our_reader_batches(rate: float, canary: bool) -> None:
    f = judged(clean, rate, canary=canary)
    assert f.verdict is Verdict.PASS, f.summary
    assert f.evidence["mechanism"] is None
    coalesced = f.evidence["coalesced"]
    assert isinstance(coalesced, dict) and coalesced["path"] == 0
    assert coalesced["read_loop"] > 0


def test_the_origins_own_server_header_is_never_the_hop_blamed() -> None:
    # haproxy passes the origin's Server header through untouched (seen: hypercorn-h11).
    f = judged(timer(200.0), 20.0, canary=True, headers=(("server", "hypercorn-h11"),))
    assert f.verdict is Verdict.WARN
    assert "at a hop between you and the origin" in f.summary
    assert "promptpath serve (hypercorn)" not in f.summary and "hypercorn" not in f.summary
    assert f.evidence["blamed_hop"] == {"hop": None, "named_by": []}
    assert f.evidence["hops"] == ["promptpath serve (hypercorn)"]  # still reported as seen
    # Blind, a timer in the origin's own writes would look the same: the summary says so.
    assert "origin's own write timer" not in f.summary
    blind = judged(timer(200.0), 20.0, canary=False, headers=(("server", "hypercorn-h11"),))
    assert "or the origin's own write timer" in blind.summary


def test_a_hop_named_by_via_is_blamed_with_the_header_that_names_it() -> None:
    headers = (("server", "hypercorn-h11"), ("Via", "1.1 varnish (Varnish/7.1)"))
    f = judged(size_buffer(4096), 20.0, canary=True, headers=headers)
    assert "at varnish (named by Via: 1.1 varnish (Varnish/7.1))" in f.summary
    blamed = f.evidence["blamed_hop"]
    assert isinstance(blamed, dict) and blamed["hop"] == ["varnish"]


def test_a_passing_stream_blames_no_hop() -> None:
    f = judged(clean, 20.0, canary=True, headers=(("Server", "nginx/1.22.1"),))
    assert f.verdict is Verdict.PASS
    assert "blamed_hop" not in f.evidence and " at " not in f.summary


def irregular(flush_at: list[float]) -> Hop:
    """A hop that flushes everything it holds at the given moments (ms), then at the end."""

    def hop(rate: float, n: int) -> tuple[Groups, list[int]]:
        groups: Groups = []
        sizes: list[int] = []
        batch: list[tuple[float, int]] = []
        moments = iter(flush_at)
        due = next(moments, None)
        for sent, nbytes in paced(rate, n):
            if due is not None and sent > due and batch:
                groups.append((due, [s for s, _ in batch]))
                sizes.append(sum(b for _, b in batch))
                batch = []
                due = next(moments, None)
            batch.append((sent, nbytes))
        groups.append((batch[-1][0] + 1.0, [s for s, _ in batch]))
        sizes.append(sum(b for _, b in batch))
        return groups, sizes

    return hop


@pytest.mark.parametrize(
    ("flush_at", "verdict"),
    [
        ([700.0, 1000.0, 1900.0, 2300.0, 3400.0, 3700.0, 4900.0], Verdict.FAIL),
        ([300.0, 500.0, 900.0, 1100.0, 1500.0, 1650.0, 2100.0, 2300.0], Verdict.WARN),
    ],
    ids=["far-apart", "close"],
)
def test_irregular_bursts_are_graded_by_their_silences(
    flush_at: list[float], verdict: Verdict
) -> None:
    f = judged(irregular(flush_at), 20.0, canary=False)
    m = mechanism(f)
    assert m["kind"] == "irregular_bursts", f.summary
    assert f.verdict is verdict
