"""Stalls and co-stalls of streams that ran at the same time: pure, stamps in, figures out.

A stream is the arrival stamps of its tokens (``perf_counter_ns`` of the socket read that
carried each content event; events that came in one read count once: a batch is one
arrival). A **stall** is a gap between two arrivals longer than the threshold (the
cadence plus a floor, ``stall_threshold_ms``). For each stall, the **co-stall share** is
the share of the *other* streams of the same group that stalled over an overlapping
interval: 1.0 when every stream stopped together, as one lost TCP segment stops every
stream of an HTTP/2 connection until its retransmission arrives (head-of-line blocking);
near the share that chance gives when each stream stalls on its own losses, as separate
connections (or QUIC's streams) do.

``benchmarks/bench_hol.py`` reads its figures from here too: one copy of the measurement.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from promptpath.core.stats import percentile
from promptpath.core.timeline import Timeline, content_events

#: The floor over the cadence is half a round trip, and at least this: on a path of a
#: millisecond or less, the event loops at both ends (a loaded machine's wake-ups) would
#: otherwise turn their own jitter into stalls.
MIN_FLOOR_MS = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Stream:
    """One stream's distinct content arrivals (ns, ``perf_counter_ns``), and how it ended."""

    times: tuple[int, ...]
    ok: bool = True

    def gaps_ms(self) -> list[float]:
        return [(b - a) / 1e6 for a, b in pairwise(self.times)]

    def stalls(self, threshold_ms: float) -> list[tuple[int, int]]:
        """The gaps longer than ``threshold_ms``, as (last arrival before, first after)."""
        return [(a, b) for a, b in pairwise(self.times) if (b - a) / 1e6 > threshold_ms]


def arrivals(timeline: Timeline) -> tuple[int, ...]:
    """The distinct stamps of the reads that carried a content event, in order."""
    return tuple(sorted({e.t_ns for e in content_events(timeline.events)}))


def stream_of(timeline: Timeline, *, ok: bool) -> Stream:
    return Stream(times=arrivals(timeline), ok=ok)


def floor_ms(rtt_ms: float | None) -> float:
    """What a gap must exceed the cadence by to be a stall: half a round trip (a lost
    segment's retransmission costs at least a whole one, so none is missed), at least
    MIN_FLOOR_MS."""
    return max(MIN_FLOOR_MS, (rtt_ms or 0.0) / 2)


def stall_threshold_ms(cadence_ms: float, rtt_ms: float | None) -> float:
    return cadence_ms + floor_ms(rtt_ms)


def cadence_ms(streams: Iterable[Stream]) -> float | None:
    """The median gap between arrivals over all the streams (None: fewer than two
    arrivals anywhere): the stream's own pace, when the probe did not set it."""
    gaps = [g for s in streams for g in s.gaps_ms()]
    return statistics.median(gaps) if gaps else None


Span = tuple[int, int]


def _overlaps(a: int, b: int, spans: Iterable[Span]) -> bool:
    return any(c < b and a < d for c, d in spans)


def kept_stalls(
    streams: Sequence[Stream], threshold_ms: float, exclude: Sequence[Span] = ()
) -> list[list[Span]]:
    """Each stream's stalls, less those overlapping an ``exclude`` span (``pauses``)."""
    return [
        [(a, b) for a, b in s.stalls(threshold_ms) if not _overlaps(a, b, exclude)] for s in streams
    ]


def pauses(streams: Sequence[Stream], threshold_ms: float) -> list[Span]:
    """The spans in which every one of ``streams`` was stalled at once. Over streams on
    separate connections as well as a shared one, such a span held them all whatever
    their connection: the server or this machine paused, not a lost segment."""
    edges = sorted(
        (t, step)
        for s in streams
        for a, b in s.stalls(threshold_ms)
        for t, step in ((a, 1), (b, -1))
    )
    spans: list[Span] = []
    active, start = 0, 0
    for t, step in edges:  # at equal times an end (-1) sorts first: touching is not overlap
        active += step
        if step == 1 and active == len(streams):
            start = t
        elif step == -1 and active == len(streams) - 1 and t > start:
            spans.append((start, t))
    return spans if len(streams) > 1 else []


def co_stall_shares(
    streams: Sequence[Stream], threshold_ms: float, exclude: Sequence[Span] = ()
) -> list[float]:
    """For each stall of each stream, the share of the other streams stalled over an
    overlapping interval (no share with fewer than two streams); stalls overlapping an
    ``exclude`` span are left out."""
    stalls = kept_stalls(streams, threshold_ms, exclude)
    shares = []
    for i, own in enumerate(stalls):
        for a, b in own:
            others = [_overlaps(a, b, st) for j, st in enumerate(stalls) if j != i]
            if others:
                shares.append(sum(others) / len(others))
    return shares


def merged(
    streams: Sequence[Stream], threshold_ms: float, exclude: Sequence[Span] = ()
) -> list[tuple[int, float]]:
    """The stalls of all the streams merged where they overlap: for each such episode,
    how many streams it held and its longest stall (ms). One lost segment on a shared
    connection is one episode holding every stream, its longest stall the lost segment's
    own stream's, at least a round trip over the cadence; the same loss on separate
    connections, one holding one."""
    kept = kept_stalls(streams, threshold_ms, exclude)
    spans = sorted((a, b, i) for i, st in enumerate(kept) for a, b in st)
    found: list[tuple[int, float]] = []
    end = -1
    members: set[int] = set()
    longest = 0
    for a, b, i in spans:
        if members and a >= end:
            found.append((len(members), longest / 1e6))
            members, longest = set(), 0
        end = b if not members else max(end, b)
        members.add(i)
        longest = max(longest, b - a)
    if members:
        found.append((len(members), longest / 1e6))
    return found


def episodes(
    streams: Sequence[Stream], threshold_ms: float, exclude: Sequence[Span] = ()
) -> list[int]:
    """How many streams each episode (``merged``) held."""
    return [n for n, _ in merged(streams, threshold_ms, exclude)]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMeasure:
    """One group of streams that ran at once (one connection, or one each), measured."""

    label: str  # "shared", "separate", "http3"
    streams: int
    completed: int  # streams that ended with their terminal marker
    http_version: str | None
    connections: int
    arrivals: int
    gap_p50_ms: float | None
    gap_p99_ms: float | None
    gap_max_ms: float | None
    stall_ms: tuple[float, ...] = ()  # every stream's stalls, in ms
    shares: tuple[float, ...] = ()  # the co-stall share of each stall
    held: tuple[int, ...] = ()  # streams each episode held (episodes())
    longest_ms: tuple[float, ...] = ()  # each episode's longest stall, beside ``held``
    paused: int = 0  # stalls left out: in a pause that held every stream of every group
    error: str | None = None  # the first stream error, as its message said it

    @property
    def stalls(self) -> int:
        return len(self.stall_ms)

    @property
    def co_stall(self) -> float | None:
        """The mean co-stall share (None: no stall, or one stream)."""
        return statistics.mean(self.shares) if self.shares else None

    @property
    def together(self) -> tuple[int, ...]:
        """Of the episodes, how many streams each one that held more than one held."""
        return tuple(n for n in self.held if n > 1)

    def together_at_least(self, ms: float) -> int:
        """Episodes that held more than one stream and whose longest stall lasted ``ms``
        or more (a retransmission's mark: see the verdict)."""
        return sum(n > 1 and t >= ms for n, t in zip(self.held, self.longest_ms, strict=True))

    @property
    def all_held(self) -> int:
        """Episodes that held every stream of the group at once."""
        return sum(n == self.streams for n in self.held) if self.streams > 1 else 0

    def as_dict(self) -> dict[str, object]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 3)

        co = self.co_stall
        return {
            "streams": self.streams,
            "completed": self.completed,
            "http_version": self.http_version,
            "connections": self.connections,
            "arrivals": self.arrivals,
            "gap_p50_ms": r(self.gap_p50_ms),
            "gap_p99_ms": r(self.gap_p99_ms),
            "gap_max_ms": r(self.gap_max_ms),
            "stalls": self.stalls,
            "stall_min_ms": r(min(self.stall_ms)) if self.stall_ms else None,
            "stall_max_ms": r(max(self.stall_ms)) if self.stall_ms else None,
            "episodes": len(self.held),
            "episodes_together": len(self.together),
            # Each such episode's longest stall: a lost segment's own stream waits a round
            # trip or more beyond the cadence.
            "together_longest_ms": [
                round(t, 1) for n, t in zip(self.held, self.longest_ms, strict=True) if n > 1
            ],
            "episodes_all_streams": self.all_held,
            "co_stall": None if co is None else round(co, 3),
            "stalls_in_pauses": self.paused,
            "error": self.error,
        }


def measure_group(
    label: str,
    streams: Sequence[Stream],
    threshold_ms: float,
    *,
    http_version: str | None,
    connections: int,
    error: str | None = None,
    exclude: Sequence[Span] = (),
) -> GroupMeasure:
    """The group's gaps, stalls, co-stall shares and episodes over ``threshold_ms``;
    stalls overlapping an ``exclude`` span (``pauses``) are counted apart, in ``paused``."""
    gaps = [g for s in streams for g in s.gaps_ms()]
    kept = kept_stalls(streams, threshold_ms, exclude)
    stall_ms = tuple((b - a) / 1e6 for st in kept for a, b in st)
    found = merged(streams, threshold_ms, exclude)
    every = sum(len(s.stalls(threshold_ms)) for s in streams)
    return GroupMeasure(
        label=label,
        streams=len(streams),
        completed=sum(s.ok for s in streams),
        http_version=http_version,
        connections=connections,
        arrivals=sum(len(s.times) for s in streams),
        gap_p50_ms=statistics.median(gaps) if gaps else None,
        gap_p99_ms=percentile(gaps, 99) if gaps else None,
        gap_max_ms=max(gaps) if gaps else None,
        stall_ms=stall_ms,
        shares=tuple(co_stall_shares(streams, threshold_ms, exclude)),
        held=tuple(n for n, _ in found),
        longest_ms=tuple(t for _, t in found),
        paused=every - len(stall_ms),
        error=error,
    )


__all__ = [
    "MIN_FLOOR_MS",
    "GroupMeasure",
    "Span",
    "Stream",
    "arrivals",
    "cadence_ms",
    "co_stall_shares",
    "episodes",
    "floor_ms",
    "kept_stalls",
    "measure_group",
    "merged",
    "pauses",
    "stall_threshold_ms",
    "stream_of",
]
