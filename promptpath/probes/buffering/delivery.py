"""The shape of a stream's delivery, from arrival stamps alone. Pure: no clock, no I/O.

Reads are grouped into *deliveries* (reads within 10 ms of each other). A *flush* is a
dense delivery (several content events per read) after a silence: what a buffering hop
produces when its buffer fills (bursts, sizes near 4/8 KiB) or the response ends (whole).
A streaming path delivers events one read at a time, spread over the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from promptpath.core.timeline import Timeline, count_content

Pattern = Literal["streamed", "bursts", "whole"]

MIN_EVENTS = 20  # content events needed before delivery can be judged
UNIT_WINDOW_NS = 10_000_000  # reads within 10 ms of a delivery's first read belong to it
SILENCE_NS = 150_000_000  # a flush follows at least this much silence
MIN_FLUSH_EVENTS = 3  # ... and brings at least this many content events
MIN_COALESCE = 2.0  # ... at least this many per read (a fast server sends one per read)
CHAIN_NS = 75_000_000  # a dense delivery this close behind a flush continues it (TCP windows)
WHOLE_SHARE = 0.8  # one burst carrying this share of the events: delivered whole
BURST_SHARE = 0.6  # bursts carrying this share: delivered in bursts
MIN_UNITS_STREAMED = 10  # separate deliveries needed to call a stream streamed
MIN_JUDGE_NS = 250_000_000  # an answer complete sooner than this cannot show a buffer
BUFFER_SIZES = (4096, 8192, 16384, 32768, 65536)


@dataclass(frozen=True, slots=True, kw_only=True)
class Unit:
    """Body bytes that arrived together: reads within ``UNIT_WINDOW_NS`` of the first."""

    start_ns: int
    end_ns: int
    nbytes: int
    nreads: int
    nevents: int  # content events completed by these reads
    silence_ns: int  # since the previous delivery (the first: since the request was sent)

    @property
    def dense(self) -> bool:
        return self.nevents >= MIN_FLUSH_EVENTS and self.nevents >= MIN_COALESCE * self.nreads


@dataclass(frozen=True, slots=True, kw_only=True)
class Burst:
    """A flush: a dense delivery after a silence, plus dense deliveries right behind it."""

    start_ns: int
    end_ns: int
    nbytes: int
    nevents: int
    silence_ns: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    pattern: Pattern | None  # None: the evidence is too thin to say
    reason: str = ""  # why pattern is None
    content_events: int = 0
    units: list[Unit] = field(default_factory=list)
    bursts: list[Burst] = field(default_factory=list)
    buffer_size: int | None = None  # burst sizes cluster at this size


def anchor_ns(timeline: Timeline) -> int:
    """When the request was sent (the start of the first silence)."""
    m = timeline.milestones
    return m.get("request_sent", m.get("ttfb", timeline.t0_ns))


def units_of(timeline: Timeline) -> list[Unit]:
    """Group body reads into deliveries; count the content events each completed."""
    per_read: dict[int, list[int]] = {}  # t_ns -> [bytes, reads, content events]
    for chunk in timeline.chunks:
        slot = per_read.setdefault(chunk.t_ns, [0, 1, 0])
        slot[0] += chunk.nbytes
    for ev in timeline.events:
        if ev.kind == "content":
            per_read.setdefault(ev.t_ns, [0, 1, 0])[2] += 1
    units: list[Unit] = []
    prev_end = anchor_ns(timeline)
    current: list[int] | None = None  # [start, end, bytes, reads, events]
    for t_ns in sorted(per_read):
        nbytes, nreads, nevents = per_read[t_ns]
        if current is not None and t_ns - current[0] <= UNIT_WINDOW_NS:
            current[1] = t_ns
            current[2] += nbytes
            current[3] += nreads
            current[4] += nevents
            continue
        if current is not None:
            units.append(_unit(current, prev_end))
            prev_end = current[1]
        current = [t_ns, t_ns, nbytes, nreads, nevents]
    if current is not None:
        units.append(_unit(current, prev_end))
    return units


def _unit(c: list[int], prev_end: int) -> Unit:
    return Unit(
        start_ns=c[0],
        end_ns=c[1],
        nbytes=c[2],
        nreads=c[3],
        nevents=c[4],
        silence_ns=max(0, c[0] - prev_end),
    )


def bursts_of(units: Sequence[Unit]) -> list[Burst]:
    """Flushes: a dense delivery after ``SILENCE_NS`` (or the first delivery), extended by
    dense deliveries within ``CHAIN_NS`` (a large flush spread over a few TCP windows)."""
    bursts: list[Burst] = []
    open_burst = False
    for i, unit in enumerate(units):
        if unit.dense and (i == 0 or unit.silence_ns >= SILENCE_NS):
            bursts.append(
                Burst(
                    start_ns=unit.start_ns,
                    end_ns=unit.end_ns,
                    nbytes=unit.nbytes,
                    nevents=unit.nevents,
                    silence_ns=unit.silence_ns,
                )
            )
            open_burst = True
        elif open_burst and unit.dense and unit.silence_ns < CHAIN_NS:
            b = bursts[-1]
            bursts[-1] = Burst(
                start_ns=b.start_ns,
                end_ns=unit.end_ns,
                nbytes=b.nbytes + unit.nbytes,
                nevents=b.nevents + unit.nevents,
                silence_ns=b.silence_ns,
            )
        else:
            open_burst = False
    return bursts


def buffer_size_of(bursts: Sequence[Burst]) -> int | None:
    """A buffer size most bursts (the last one aside: the final flush) are close to."""
    sizes = [b.nbytes for b in bursts[:-1]]
    if len(sizes) < 2:
        return None
    for size in BUFFER_SIZES:
        near = sum(1 for s in sizes if abs(s - size) <= size * 0.05)
        if near >= max(2, (len(sizes) + 1) // 2):
            return size
    return None


def delivery(timeline: Timeline) -> Delivery:
    content = count_content(timeline.events)
    units = units_of(timeline)
    bursts = bursts_of(units)

    def made(pattern: Pattern | None, reason: str = "", size: int | None = None) -> Delivery:
        return Delivery(
            pattern=pattern,
            reason=reason,
            content_events=content,
            units=units,
            bursts=bursts,
            buffer_size=size,
        )

    if content < MIN_EVENTS:
        # What to do about it (ask for more tokens, or not) is the caller's call: only it
        # knows how many tokens were asked for.
        return made(
            None,
            f"only {content} content events arrived: too few to tell streaming from buffering"
            f" (need ≥ {MIN_EVENTS})",
        )
    in_bursts = sum(b.nevents for b in bursts)
    biggest = max(bursts, key=lambda b: b.nevents, default=None)
    if biggest is not None and biggest.nevents >= WHOLE_SHARE * content:
        took = biggest.end_ns - anchor_ns(timeline)
        if took < MIN_JUDGE_NS:
            return made(
                None,
                f"the whole answer arrived {took / 1e6:.0f} ms after the request: too fast to"
                " tell a buffering hop from a fast server",
            )
        return made("whole")
    if len(bursts) >= 2 and in_bursts >= BURST_SHARE * content:
        return made("bursts", size=buffer_size_of(bursts))
    if len(units) >= MIN_UNITS_STREAMED:
        return made("streamed")
    return made(
        None,
        f"{content} events arrived in only {len(units)} separate deliveries, neither spread"
        " out nor in clear flushes",
    )
