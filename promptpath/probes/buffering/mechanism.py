"""What holds the stream back, and its grade. Pure: no clock, no I/O.

A hop's mechanism, not the model's speed, decides the grade, so the same hop gets the
same verdict at 10, 20, 50 or 100 tokens/s. The evidence names the mechanism and the
numbers that show it:

- ``size_buffer``: deliveries of the same size to the byte, each after a silence,
  carrying many events: a buffer flushed when full (nginx ``proxy_buffering`` hands over
  4 KiB blocks). Always ``fail``: every event waits until the buffer fills, and the
  slower the model the longer (at 20 tokens/s a 4 KiB block holds an event ~600 ms).
- ``time_coalescing``: deliveries at a steady interval whatever they carry, several
  events each: a flush timer (haproxy without ``http-no-delay`` sends with MSG_MORE and
  the kernel holds partial segments 200 ms). The hold is the timer's, so the grade is
  too: ``warn`` below ``TIMER_FAIL_MS``, ``fail`` from there.
- ``whole_response``: (nearly) every event in one late delivery. Always ``fail``.
- ``compression``: a compressed event stream held back in blocks, bursts or whole (a
  compressor emits when its block fills, or at the end). Always ``fail``; the probe's
  identity request tells whether the compression alone holds it. A compressed stream
  on a steady timer stays ``time_coalescing``: no compressor flushes on a clock.
- ``irregular_bursts``: held back in bursts of neither steady size nor steady interval:
  graded by how long events were held (canary) or how far apart the bursts came (blind),
  the only measure left.
- ``provider_guardrail``: any of those shapes when the request itself turned on a
  provider's check that releases the answer in scanned batches (Amazon Bedrock Guardrails
  in their default synchronous streaming mode). The provider holds the text, not a hop on
  the path; the asynchronous mode streams as generated (and checks afterwards). Graded as
  the shape is: the reader waits all the same.
- ``content_filter``: the provider's own content filter, not a hop: Azure OpenAI's default
  streaming mode buffers the output, checks it and releases it in batches, each with the
  filter's verdict chunk (``content_filter_results`` with ``content_filter_offsets``). The
  deliveries then follow the verdicts: one verdict in each delivery that carries content,
  several events before it. Its Asynchronous Filter mode streams token by token instead
  (the verdicts come later, apart from the text). Graded as ``irregular_bursts`` is, by
  the holds or the silences; the advice is the filter mode, not a proxy setting.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from statistics import median
from typing import Literal

from promptpath.core.coalescing import COALESCE_SLACK_NS, Coalescing
from promptpath.core.findings import Verdict
from promptpath.core.timeline import StreamEvent, Timeline, content_events
from promptpath.probes.buffering.delivery import (
    BURST_SHARE,
    MIN_EVENTS,
    MIN_FLUSH_EVENTS,
    Burst,
    Delivery,
    Unit,
)

Kind = Literal[
    "size_buffer",
    "time_coalescing",
    "whole_response",
    "compression",
    "irregular_bursts",
    "provider_guardrail",
    "content_filter",
]

#: ``StreamEvent.name`` of the filter's verdict on a span of the output (Azure OpenAI).
FILTER_VERDICT = "content_filter_results"
#: Share of the content-bearing deliveries that must hold exactly one verdict.
FILTER_ALIGNED_SHARE = 2 / 3

MIN_BLOCK_BYTES = 1024  # smaller equal deliveries are a few equal events, not a buffer
MIN_FLUSHES = 3  # deliveries (the last aside) needed to call their size or pace steady
STEADY_CV = 0.15  # intervals within this (robust) coefficient of variation are a timer's
OFF_BEAT = 2 * STEADY_CV  # an interval this far from the median is a late or missed tick
#: A steadier pace than this holds events too briefly to matter (and is how some origins
#: write anyway): not graded as a hop's timer.
MIN_TIMER_MS = 100.0
TIMER_FAIL_MS = 500.0  # a flush timer this long holds events as long as a user notices
FAIL_SILENCE_MS = 500.0  # irregular bursts this far apart: "arrives in blocks"


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderHold:
    """A provider-side check the request turned on that holds output until it is scanned."""

    provider: str  # "amazon-bedrock-guardrails"
    name: str  # how the summary names it
    changes: str  # what makes it stream instead (the asynchronous mode)


#: Bedrock Guardrails, synchronous streaming mode (the default): the response is buffered
#: and released in chunks once the guardrail's policies have scanned them.
BEDROCK_GUARDRAIL_SYNC = ProviderHold(
    provider="amazon-bedrock-guardrails",
    name="Amazon Bedrock Guardrails' synchronous streaming mode",
    changes=(
        'the asynchronous mode (Converse guardrailConfig.streamProcessingMode "async",'
        ' invoke\'s amazon-bedrock-guardrailConfig.streamProcessingMode "asynchronous")'
        " streams as the model writes and applies the policies after the text is shown"
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Mechanism:
    kind: Kind
    verdict: Verdict
    said: str  # what the evidence shows, with its numbers, for the summary
    grade: str  # why this verdict, for the evidence
    facts: dict[str, object] = field(default_factory=dict)
    flushes: tuple[Burst, ...] = ()  # the deliveries that showed it
    lead: str = ""  # the few words that lead the verdict line


def _burst(u: Unit) -> Burst:
    return Burst(
        start_ns=u.start_ns,
        end_ns=u.end_ns,
        nbytes=u.nbytes,
        nevents=u.nevents,
        silence_ns=u.silence_ns,
    )


def _span(values: Sequence[int]) -> str:
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _kib(n: float) -> str:
    return f"{n / 1024:.1f} KiB"


def _events_in(u: Unit, events: Sequence[StreamEvent]) -> list[StreamEvent]:
    return [e for e in events if u.start_ns <= e.t_ns <= u.end_ns]


def _unstamped(events: Sequence[StreamEvent]) -> list[StreamEvent]:
    return [dataclasses.replace(e, server_sent_unix_ns=None) for e in events]


def held_ms(u: Unit, events: Sequence[StreamEvent]) -> float | None:
    """How long the delivery's first event waited at least: the send times it spans."""
    sent = [e.server_sent_unix_ns for e in _events_in(u, events) if e.server_sent_unix_ns]
    return (max(sent) - min(sent)) / 1e6 if len(sent) >= 2 else None


def _steady_ms(starts: Sequence[int]) -> tuple[float, float] | None:
    """Median interval and its robust coefficient of variation (1.4826 x the median absolute
    deviation, over the median), when at least two intervals; None when more than a
    quarter of the intervals stray beyond ``OFF_BEAT`` of the median.

    Robust because a timer stays a timer when a few deliveries come late: a loaded client
    read two of haproxy's 20 corked deliveries 420 and 496 ms after the one before,
    instead of ~250 ms, and the plain coefficient of variation (0.26) called the timer
    irregular (CI, 2026-12-06)."""
    gaps = [(b - a) / 1e6 for a, b in pairwise(starts)]
    if len(gaps) < 2:
        return None
    mid = median(gaps)
    if mid <= 0:
        return None
    off_beat = sum(abs(g - mid) > OFF_BEAT * mid for g in gaps)
    if 4 * off_beat > len(gaps):
        return None
    return mid, 1.4826 * median(abs(g - mid) for g in gaps) / mid


def _holds_fact(flushes: Sequence[Unit], events: Sequence[StreamEvent]) -> dict[str, object]:
    held = [h for u in flushes if (h := held_ms(u, events)) is not None]
    return {"first_event_held_ms": round(median(held), 1)} if held else {}


def size_buffer(d: Delivery, events: Sequence[StreamEvent]) -> Mechanism | None:
    """Dense deliveries after a silence, most of the same byte count (the first may be
    short: nginx's first buffer also held the upstream's headers, 3,883 + 213 bytes)."""
    body = d.units[:-1]  # the last delivery is the end of the stream, whatever its size
    blocks = [u for u in body if u.dense and u.silence_ns >= COALESCE_SLACK_NS]
    if len(blocks) < MIN_FLUSHES:
        return None
    size, same = Counter(u.nbytes for u in blocks).most_common(1)[0]
    if size < MIN_BLOCK_BYTES or same < 2 or 3 * same < 2 * (len(blocks) - 1):
        return None
    in_blocks = sum(u.nevents for u in blocks) + d.units[-1].nevents
    if in_blocks < BURST_SHARE * d.content_events:
        return None
    full = [u for u in blocks if u.nbytes == size]
    gaps = [(b.start_ns - a.start_ns) / 1e6 for a, b in pairwise(full)]
    interval = median(gaps) if gaps else None
    per_block = median(u.nevents for u in full)
    facts: dict[str, object] = {
        "block_bytes": size,
        "blocks": same,
        "events_per_block": per_block,
        "interval_ms": None if interval is None else round(interval, 1),
        **_holds_fact(full, events),
    }
    every = "" if interval is None else f", one every ~{interval:.0f} ms"
    return Mechanism(
        kind="size_buffer",
        verdict=Verdict.FAIL,
        lead=f"a hop delivers the stream in {_kib(size)} blocks",
        said=(
            f"a size-triggered buffer: {same} deliveries of exactly {size} bytes"
            f" ({_kib(size)}, ~{per_block:g} events each{every}), each event held until"
            " the block filled"
        ),
        grade=(
            "fail at any token rate: each event waits until the buffer fills, and the"
            " slower the model, the longer"
        ),
        facts=facts,
        flushes=tuple(_burst(u) for u in blocks + d.units[-1:]),
    )


def time_coalescing(
    d: Delivery, events: Sequence[StreamEvent], path_flags: Sequence[bool]
) -> Mechanism | None:
    """Deliveries at a steady interval, most carrying events the path held together."""
    content = content_events(events)
    flagged = [e.t_ns for e, on_path in zip(content, path_flags, strict=False) if on_path]
    body = d.units[:-1]  # the end of the stream flushes early
    held = [u for u in body if u.dense and any(u.start_ns <= t <= u.end_ns for t in flagged)]
    if len(held) < MIN_FLUSHES or 3 * len(held) < 2 * len(body):
        return None
    if sum(u.nevents for u in held) + d.units[-1].nevents < BURST_SHARE * d.content_events:
        return None
    steady = _steady_ms([u.start_ns for u in body])
    if steady is None or steady[1] > STEADY_CV or steady[0] < MIN_TIMER_MS:
        return None
    interval, cv = steady
    sizes = [u.nevents for u in held]
    facts: dict[str, object] = {
        "interval_ms": round(interval, 1),
        "interval_cv": round(cv, 3),
        "events_per_delivery": {"min": min(sizes), "max": max(sizes)},
        "bytes_per_delivery": {
            "min": min(u.nbytes for u in held),
            "max": max(u.nbytes for u in held),
        },
        **_holds_fact(held, content),
    }
    timer = facts.get("first_event_held_ms")
    held_for = f"; the first event of each held {timer:g} ms" if timer is not None else ""
    fail = interval >= TIMER_FAIL_MS
    return Mechanism(
        kind="time_coalescing",
        verdict=Verdict.FAIL if fail else Verdict.WARN,
        lead=f"a hop holds the stream and flushes it every ~{interval:.0f} ms",
        said=(
            f"time-triggered coalescing: a delivery every ~{interval:.0f} ms (±{cv:.0%}),"
            f" {_span(sizes)} events each, whatever their size{held_for}"
        ),
        grade=(
            f"{'fail' if fail else 'warn'} at any token rate: a flush timer holds each event"
            f" at most its interval, here ~{interval:.0f} ms"
            f" ({'at or above' if fail else 'under'} {TIMER_FAIL_MS:.0f} ms)"
        ),
        facts=facts,
        flushes=tuple(_burst(u) for u in held),
    )


def whole_response(d: Delivery) -> Mechanism:
    b = max(d.bursts, key=lambda b: b.nevents)
    return Mechanism(
        kind="whole_response",
        verdict=Verdict.FAIL,
        lead="a hop holds the whole answer back until it ends",
        said=(
            f"whole-response delivery: {b.nevents} of {d.content_events} events in one"
            f" burst of {_kib(b.nbytes)} after {b.silence_ns / 1e9:.1f} s of silence"
        ),
        grade="fail at any token rate: nothing reaches the reader before the answer ends",
        facts={"events": b.nevents, "bytes": b.nbytes, "silence_ms": round(b.silence_ns / 1e6)},
        flushes=(b,),
    )


def _grade(d: Delivery, hold_verdict: Verdict | None) -> tuple[Verdict, str, float | None]:
    """By the canary's holds, else by the silences between bursts: (verdict, rule, gap)."""
    silences = [b.silence_ns / 1e6 for b in d.bursts[1:]]
    gap = median(silences) if silences else None
    if hold_verdict is not None:
        return hold_verdict, "graded by how long events were held (canary send times)", gap
    far = gap is not None and gap >= FAIL_SILENCE_MS
    rule = f"graded by the silences between bursts (fail from {FAIL_SILENCE_MS:.0f} ms)"
    return (Verdict.FAIL if far else Verdict.WARN), rule, gap


def content_filter(
    d: Delivery, events: Sequence[StreamEvent], hold_verdict: Verdict | None
) -> Mechanism | None:
    """Deliveries that follow the provider's filter verdicts: each content-bearing one
    holds one verdict and several events, as a filter releasing checked batches sends."""
    verdicts = [e.t_ns for e in events if e.name == FILTER_VERDICT]
    carrying = [u for u in d.units if u.nevents > 0]
    if len(verdicts) < MIN_FLUSHES or len(carrying) < MIN_FLUSHES:
        return None
    aligned = [u for u in carrying if sum(u.start_ns <= t <= u.end_ns for t in verdicts) == 1]
    if len(aligned) < FILTER_ALIGNED_SHARE * len(carrying):
        return None
    per_batch = median(u.nevents for u in aligned)
    if per_batch < MIN_FLUSH_EVENTS:  # token by token, verdicts alongside: not held
        return None
    verdict, rule, _gap = _grade(d, hold_verdict)
    if verdict in (Verdict.PASS, Verdict.SKIP):
        return None  # batches too quick to matter: the stream counts as streamed
    steady = _steady_ms([u.start_ns for u in aligned])
    every = "" if steady is None else f", one every ~{steady[0]:.0f} ms"
    sizes = [u.nevents for u in aligned]
    facts: dict[str, object] = {
        "provider": "azure-openai",
        "batches": len(aligned),
        "verdicts": len(verdicts),
        "events_per_batch": {"min": min(sizes), "max": max(sizes), "median": per_batch},
        "interval_ms": None if steady is None else round(steady[0], 1),
        "asynchronous_filter_changes_it": True,
        **_holds_fact(aligned, events),
    }
    return Mechanism(
        kind="content_filter",
        verdict=verdict,
        lead="the provider's content filter releases the answer in checked batches",
        said=(
            f"the provider's content filter, not a proxy: Azure OpenAI's default streaming"
            f" mode released the output in {len(aligned)} checked batches of {_span(sizes)}"
            f" events{every}, each with the filter's verdict (content_filter_results);"
            " its Asynchronous Filter mode streams token by token instead"
        ),
        grade=f"{verdict.value}: {rule}; the hold is the filter's, by design",
        facts=facts,
        flushes=tuple(_burst(u) for u in aligned),
    )


def irregular_bursts(d: Delivery, hold_verdict: Verdict | None) -> Mechanism:
    verdict, rule, gap = _grade(d, hold_verdict)
    apart = f" ~{gap:.0f} ms apart" if gap is not None else ""
    return Mechanism(
        kind="irregular_bursts",
        verdict=verdict,
        lead=f"a hop holds the stream back in bursts{apart}",
        said=f"held back in bursts{apart} of neither steady size nor steady interval",
        grade=f"{verdict.value}: {rule}",
        facts={"silence_p50_ms": None if gap is None else round(gap, 1)},
        flushes=tuple(d.bursts),
    )


def classify(
    timeline: Timeline,
    d: Delivery,
    together: Coalescing,
    *,
    encoding: str | None = None,
    hold_verdict: Verdict | None = None,
    provider_hold: ProviderHold | None = None,
) -> Mechanism | None:
    """The mechanism that held the stream back, or None when nothing shows one.

    ``hold_verdict`` is the canary's grade of the per-event holds (None in blind mode);
    ``provider_hold`` a batch-releasing check the request turned on (its guardrail).
    """
    found = _shape(timeline, d, together, encoding=encoding, hold_verdict=hold_verdict)
    if found is None or provider_hold is None:
        return found
    return Mechanism(
        kind="provider_guardrail",
        verdict=found.verdict,
        lead=f"{provider_hold.name} holds the answer until each batch is scanned",
        said=(
            f"{provider_hold.name}, holding the answer until each batch was scanned: {found.said}"
        ),
        grade=(
            f"{found.verdict.value}: the provider holds each batch until its guardrail has"
            f" scanned it, not a hop on the path; {provider_hold.changes}"
        ),
        facts={
            "provider": provider_hold.provider,
            "shape": found.facts.get("shape", found.kind),
            **{k: v for k, v in found.facts.items() if k != "shape"},
        },
        flushes=found.flushes,
    )


def _shape(
    timeline: Timeline,
    d: Delivery,
    together: Coalescing,
    *,
    encoding: str | None,
    hold_verdict: Verdict | None,
) -> Mechanism | None:
    if d.content_events < MIN_EVENTS or not d.units:
        return None
    # Send stamps speak only in canary mode: blind mode judges as for any endpoint.
    stamped = together.judged_by == "send_times"
    events = timeline.events if stamped else _unstamped(timeline.events)
    # The provider's filter first: its batches can look like any hop's buffer.
    found = (
        content_filter(d, events, hold_verdict)
        or size_buffer(d, events)
        or (whole_response(d) if d.pattern == "whole" else None)
        or time_coalescing(d, events, together.path_flags)
    )
    held = hold_verdict in (Verdict.WARN, Verdict.FAIL)
    if found is None and (held or (d.pattern == "bursts" and hold_verdict is None)):
        found = irregular_bursts(d, hold_verdict)
    if found is None or encoding is None:
        return found
    if found.kind == "time_coalescing":
        # A compressor holds until its block fills or the end, never on a steady clock:
        # the timer is a hop's, whatever the coding.
        return dataclasses.replace(found, facts={**found.facts, "encoding": encoding})
    return Mechanism(
        kind="compression",
        verdict=Verdict.FAIL,
        lead=f"a hop's compression ({encoding}) holds the stream back",
        said=f"compression ({encoding}) holding events back, as {found.said}",
        grade=(
            "fail at any token rate: a compressor emits when its block fills or the answer ends"
        ),
        facts={"encoding": encoding, "shape": found.kind, **found.facts},
        flushes=found.flushes,
    )
