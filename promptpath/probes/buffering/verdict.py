"""Buffering verdict: from one traced stream's stamps to a Finding. Pure: no clock, no I/O.

Blind mode (any endpoint) reads only arrival stamps: the delivery shape from
``delivery`` (streamed, bursts, whole), plus header signs and hops named in headers.
What held the stream back (``mechanism``) decides the grade, so a hop gets the
same verdict whatever the model's speed.

Canary mode (the target is ``promptpath serve``) also has each event's server send time:
the *hold* of an event is its arrival lag minus the smallest lag seen, so it needs no
clock agreement between the machines. Holds that grow through a burst and collapse at
each flush are buffering measured directly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from promptpath.core.coalescing import coalescing
from promptpath.core.findings import Finding, Verdict
from promptpath.core.media import stream_format
from promptpath.core.stats import percentile
from promptpath.core.timeline import StreamEvent, Timeline, count_content
from promptpath.probes.buffering.compression import compression_facts, for_this_client
from promptpath.probes.buffering.delivery import (
    MIN_EVENTS,
    MIN_JUDGE_NS,
    Burst,
    Delivery,
    anchor_ns,
    delivery,
)
from promptpath.probes.buffering.mechanism import (
    FAIL_SILENCE_MS,
    Mechanism,
    ProviderHold,
    classify,
)
from promptpath.probes.hophints import header_hints, hops_between, hops_named

PROBE = "buffering"
HOLD_WARN_P90_MS = 150.0
HOLD_FAIL_P50_MS = 250.0
HOLD_FAIL_P90_MS = 1000.0
HOLD_JUMP_MS = 100.0  # a hold this much above the previous event's: a new burst began
CLOCK_SLACK_NS = 50_000_000  # lags below -50 ms: the two machines' clocks disagree
MAX_LISTED = 20  # bursts/silences listed in the evidence
MIN_ASK = 64  # the fewest tokens worth asking for when a stream was too short to judge
#: What to do about the provider's content filter holding the stream (no hop setting helps).
FILTER_ADVICE = (
    "Azure OpenAI: the default content filter holds each batch of output until it is"
    " checked; a content filter configuration with the Asynchronous Filter streaming mode"
    " (api-version 2024-02-01 or later), applied to the deployment, returns tokens as they"
    " are made and sends the filter's verdicts later (the application must then handle a"
    " late verdict). No proxy setting changes it"
)


# -- header signs ----------------------------------------------------------------------
def is_stream(timeline: Timeline) -> bool:
    """The response is an event stream: by its content type, or events were decoded."""
    # Only on a stream (SSE, NDJSON) is Content-Length a buffering sign.
    return stream_format(timeline.header("content-type")) is not None or any(
        e.kind == "content" for e in timeline.events
    )


def stream_signs(timeline: Timeline) -> dict[str, object]:
    """Header-level signs of a buffering hop on an event stream."""
    signs: dict[str, object] = {}
    if is_stream(timeline):
        if timeline.header("content-length") is not None:
            signs["content_length"] = timeline.header("content-length")
        encoding = (timeline.header("content-encoding") or "identity").strip().lower()
        if encoding != "identity":
            signs["content_encoding"] = encoding
    ttfb = timeline.milestones.get("ttfb")
    first_body = min((c.t_ns for c in timeline.chunks), default=None)
    if ttfb is not None and first_body is not None:
        wait = ttfb - anchor_ns(timeline)
        # "With" the body: a hop that held the headers writes them and the body back to
        # back, not always in one segment (mitmproxy 11 after a 3 s hold: two reads 1.0-1.2
        # ms apart, measured), so the slack grows with the silence before them.
        together = first_body - ttfb <= max(1_000_000, wait // 50)
        if together and wait >= MIN_JUDGE_NS:
            signs["headers_with_first_body_after_ms"] = round(wait / 1e6, 1)
    return signs


# -- canary: holds from server send times ----------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class Holds:
    """How long the path held each stamped event beyond the quickest one."""

    holds_ms: list[float]  # per event, in send order
    floor_ms: float  # the smallest arrival lag (absolute: only meaningful if synced)
    synced: bool  # lags never below -CLOCK_SLACK_NS: one clock, or NTP-close clocks
    flushes: int  # bursts seen as holds: in send order a hold jumps up at each new burst


def lag_ns(timeline: Timeline, event: StreamEvent) -> int | None:
    """Arrival minus server send time, on our clock (assumes comparable wall clocks)."""
    if event.server_sent_unix_ns is None:
        return None
    sent_ns = event.server_sent_unix_ns - timeline.t0_unix_ns + timeline.t0_ns
    return event.t_ns - sent_ns


def holds_of(timeline: Timeline) -> Holds | None:
    stamped = [
        (e.seq if e.seq is not None else i, lag)
        for i, e in enumerate(timeline.events)
        if e.kind != "comment" and (lag := lag_ns(timeline, e)) is not None
    ]
    if len(stamped) < MIN_EVENTS:
        return None
    stamped.sort()
    lags = [lag for _, lag in stamped]
    floor = min(lags)
    holds = [(lag - floor) / 1e6 for lag in lags]
    # In send order the first event of a burst waited longest and the last one hardly
    # at all, so each new burst shows as a jump up in the hold.
    flushes = sum(1 for a, b in pairwise(holds) if b - a >= HOLD_JUMP_MS)
    return Holds(
        holds_ms=holds,
        floor_ms=floor / 1e6,
        synced=floor >= -CLOCK_SLACK_NS,
        flushes=flushes,
    )


def _hold_verdict(holds: Holds) -> Verdict:
    p50 = percentile(holds.holds_ms, 50)
    p90 = percentile(holds.holds_ms, 90)
    if p50 >= HOLD_FAIL_P50_MS or p90 >= HOLD_FAIL_P90_MS:
        return Verdict.FAIL
    if p90 >= HOLD_WARN_P90_MS:
        return Verdict.WARN
    return Verdict.PASS


def _canary_facts(holds: Holds) -> tuple[Verdict, str, dict[str, object]]:
    """Verdict, one-line description and evidence of the per-event holds."""
    h = holds.holds_ms
    p50, p90 = percentile(h, 50), percentile(h, 90)
    facts: dict[str, object] = {
        "added_delay_ms": {
            "p50": round(p50, 1),
            "p90": round(p90, 1),
            "p99": round(percentile(h, 99), 1),
            "max": round(max(h), 1),
        },
        "flushes": holds.flushes,
        "clock": "synced" if holds.synced else "offset",
        "floor_lag_ms": round(holds.floor_ms, 1) if holds.synced else None,
        "per_hop_note": "added delay is for the whole chain between promptpath serve and this"
        " client; run the canary against each hop's address to split it per hop",
    }
    held = (
        f"events held {p50:.0f} ms (p50) / {p90:.0f} ms (p90), up to {max(h):.0f} ms, between"
        " promptpath serve and here"
    )
    if holds.flushes:
        held += f" ({holds.flushes} flushes)"
    return _hold_verdict(holds), held, facts


def header_phrase(signs: dict[str, object], *, for_client: bool = False) -> str | None:
    """The header signs that alone make a stream suspect (Content-Length, compression)."""
    said = []
    if "content_length" in signs:
        said.append(
            f"a hop sent Content-Length: {signs['content_length']} on the event stream (it"
            " held the whole response to count it)"
        )
    if "content_encoding" in signs:
        whom = " for this client" if for_client else ""
        said.append(f"a hop compresses the event stream{whom} ({signs['content_encoding']})")
    return " and ".join(said) or None


def blamed_hop(headers: Sequence[tuple[str, str]]) -> tuple[str, dict[str, object]]:
    """Where to put the blame: a hop a response header names (never the origin's own
    server), else "a hop between you and the origin"; with the evidence either way."""
    named = hops_between(headers)
    if not named:
        return (
            "a hop between you and the origin (no Via, proxy Server, cache or CDN header names it)",
            {"hop": None, "named_by": []},
        )
    hops: list[str] = []
    for h in named:
        if h["hop"] not in hops:
            hops.append(h["hop"])
    by = ", ".join(f"{h['header']}: {h['value']}" for h in named)
    where = hops[0] if len(hops) == 1 else "one of " + ", ".join(hops)
    return f"{where} (named by {by})", {"hop": hops, "named_by": named}


#: The verdict line quotes the header that names the hop up to this many characters.
LEAD_HEADER_CHARS = 60


def named_in(blame_facts: dict[str, object]) -> str:
    """`` (Via: 1.1 nginx)``: the first header that names the blamed hop, for the verdict
    line (the summary lists them all); empty when none names it."""
    named = blame_facts.get("named_by")
    if not isinstance(named, list) or not named or not isinstance(named[0], dict):
        return ""
    said = f"{named[0].get('header')}: {named[0].get('value')}"
    if len(said) > LEAD_HEADER_CHARS:
        said = said[: LEAD_HEADER_CHARS - 1] + "…"
    return f" ({said})"


# -- a stream too short to judge -------------------------------------------------------
def tokens_sent(timeline: Timeline) -> tuple[int, str]:
    """(tokens the server sent, counted from "usage" or "events"): its own count if it
    reported one, else the content events (one token or more each)."""
    counts = [e.usage.output_tokens for e in timeline.events if e.usage and e.usage.output_tokens]
    if counts:
        return counts[-1], "usage"
    return count_content(timeline.events), "events"


def short_stream_note(timeline: Timeline, content: int, max_tokens: int | None) -> str:
    """What to do about a stream too short to judge: ask for more, unless the server
    already stopped short of what was asked (then more would not help)."""
    sent, source = tokens_sent(timeline)
    if max_tokens is not None and sent < max_tokens:
        unit = "tokens" if source == "usage" else "content events"
        return (
            f"the server stopped early: {sent} {unit} of the {max_tokens} tokens asked for"
            " (--max-tokens is not what limits this answer)"
        )
    want = MIN_ASK
    if max_tokens is not None:
        # A server that packs several tokens into one event needs proportionally more.
        want = max(want, math.ceil(2 * MIN_EVENTS * max_tokens / max(1, content)))
    return f"raise --max-tokens to ≥ {want}"


# -- the finding -----------------------------------------------------------------------
def _kib(n: float) -> str:
    return f"{n / 1024:.1f} KiB"


def _silences_ms(bursts: Sequence[Burst]) -> list[float]:
    """Silences before each burst but the first (that one includes the model's TTFT)."""
    return [round(b.silence_ns / 1e6, 1) for b in bursts[1:]]


def _bursts_evidence(timeline: Timeline, bursts: Sequence[Burst]) -> dict[str, object]:
    return {
        "bursts": [
            {
                "t_ms": timeline.ms(b.start_ns),
                "bytes": b.nbytes,
                "events": b.nevents,
                "silence_before_ms": round(b.silence_ns / 1e6, 1),
            }
            for b in bursts[:MAX_LISTED]
        ],
        "burst_bytes": [b.nbytes for b in bursts[:MAX_LISTED]],
        "silences_ms": _silences_ms(bursts)[:MAX_LISTED],
    }


def _blind_verdict(d: Delivery) -> Verdict:
    if d.pattern is None:
        return Verdict.SKIP
    if d.pattern == "whole":
        return Verdict.FAIL
    if d.pattern == "bursts":
        silences = _silences_ms(d.bursts)
        if silences and percentile(silences, 50) >= FAIL_SILENCE_MS:
            return Verdict.FAIL
        return Verdict.WARN
    return Verdict.PASS


def _describe(d: Delivery, timeline: Timeline) -> str:
    if d.pattern == "whole":
        b = max(d.bursts, key=lambda b: b.nevents)
        return (
            f"the stream arrived whole: {b.nevents} of {d.content_events} events in one burst"
            f" of {_kib(b.nbytes)} after {b.silence_ns / 1e9:.1f} s of silence"
        )
    if d.pattern == "bursts":
        silences = _silences_ms(d.bursts)
        sizes = [b.nbytes for b in d.bursts]
        size = f"~{_kib(d.buffer_size)}" if d.buffer_size else f"~{_kib(percentile(sizes, 50))}"
        gap = f" separated by ~{percentile(silences, 50):.0f} ms silences" if silences else ""
        return f"the stream arrived in {len(d.bursts)} bursts of {size}{gap}"
    if d.pattern == "streamed":
        gaps = [u.silence_ns / 1e6 for u in d.units[1:]]
        longest = f", longest silence {max(gaps):.0f} ms" if gaps else ""
        return (
            f"the stream arrived as it was sent: {d.content_events} events in"
            f" {len(d.units)} separate deliveries{longest}"
        )
    return d.reason


def _advice(
    verdict: Verdict,
    hops: Sequence[str],
    signs: dict[str, object],
    mechanism: Mechanism | None,
    *,
    for_client: bool = False,
) -> list[str]:
    advice: list[str] = []
    held = verdict in (Verdict.WARN, Verdict.FAIL)
    # Compression the client asked for is only a fault when the stream was held back.
    if "content_encoding" in signs and (held or not for_client):
        why = (
            "for clients that accept it, and the stream was held back"
            if for_client
            else "although the request did not offer it"
        )
        advice.append(
            f"a hop compresses the event stream ({signs['content_encoding']}) {why}: exclude"
            " text/event-stream from compression (nginx gzip_types, caddy `encode` matcher,"
            " haproxy `compression type`)"
        )
    if "content_length" in signs:
        advice.append(
            "a hop sends Content-Length on an event stream: it buffered the whole response to"
            " count it; turn response buffering off for this path"
        )
    if verdict not in (Verdict.WARN, Verdict.FAIL):
        return advice
    if mechanism is not None and mechanism.kind == "provider_guardrail":
        return [
            *advice,
            "Bedrock Guardrails: set the guardrail's streamProcessingMode to async (Converse)"
            " or asynchronous (invoke's amazon-bedrock-guardrailConfig) to stream as the model"
            " writes; the policies then apply after the text is shown, so a blocked answer"
            " may be partly seen",
        ]
    if mechanism is not None and mechanism.kind == "content_filter":
        advice.append(FILTER_ADVICE)
        return advice
    facts = mechanism.facts if mechanism is not None else {}
    shape = facts.get("shape", mechanism.kind if mechanism is not None else None)
    interval = facts.get("interval_ms")
    # A ~200 ms flush timer: the kernel's MSG_MORE cork, as haproxy without http-no-delay.
    cork = shape == "time_coalescing" and isinstance(interval, float) and interval < 300.0
    nginx = "nginx" in hops or facts.get("block_bytes") in (4096, 8192)
    caddy = "caddy" in hops
    haproxy = "haproxy" in hops or cork
    unknown = not (nginx or caddy or haproxy)
    if nginx or unknown:
        advice.append(
            "nginx: `proxy_buffering off;` in this location, or have the upstream send"
            " `X-Accel-Buffering: no`; with buffering on, `proxy_http_version 1.1;` (and"
            ' `proxy_set_header Connection "";`) lets a chunked upstream stream through;'
            " keep `gzip` off for text/event-stream"
        )
    if caddy or unknown:
        advice.append(
            "caddy: remove `encode` for text/event-stream (it decides on the first write and"
            " can hold data back), or set `flush_interval -1` in reverse_proxy"
        )
    if haproxy or unknown:
        advice.append(
            "haproxy: `option http-no-delay` (without it haproxy sends with MSG_MORE and the"
            " kernel holds partial segments up to 200 ms)"
        )
    if any(h in hops for h in ("cloudflare", "cloudfront", "fastly", "azure-front-door")):
        advice.append("CDN: bypass caching and response buffering for the streaming path")
    return advice


def judge(
    timeline: Timeline,
    *,
    canary: bool,
    max_tokens: int | None = None,
    context: dict[str, object] | None = None,
    offered: Sequence[str] = (),
    provider_hold: ProviderHold | None = None,
) -> Finding:
    """The buffering finding for one traced stream (the probe's own request).

    ``max_tokens`` is what the request asked for: it tells a server that stopped early
    from a limit set too low. ``offered`` are the content codings it accepted (the
    client shape's): a stream compressed in one of them is the path serving this client.
    """
    d = delivery(timeline)
    signs = stream_signs(timeline)
    hints = header_hints(timeline.response_headers)
    hops = hops_named(timeline.response_headers)
    together = coalescing(timeline, send_times=canary)
    evidence: dict[str, object] = {
        "mode": "canary" if canary else "blind",
        "pattern": d.pattern,
        "mechanism": None,
        "content_events": d.content_events,
        "deliveries": len(d.units),
        **_bursts_evidence(timeline, d.bursts),
        "buffer_size_bytes": None,
        "coalesced": {
            "path": together.path,
            "read_loop": together.read_loop,
            "judged_by": together.judged_by,
        },
        "header_hints": hints,
        "signs": signs,
        "hops": hops,
        **(context or {}),
    }
    sent, counted_from = tokens_sent(timeline)
    evidence["tokens"] = {
        "asked": max_tokens,
        "sent": sent,
        "counted_from": counted_from,
        "stopped_early": max_tokens is not None and sent < max_tokens,
    }
    verdict = _blind_verdict(d)
    summary = _describe(d, timeline)
    holds = holds_of(timeline) if canary else None
    if canary and holds is None:
        stamped = sum(1 for e in timeline.events if e.server_sent_unix_ns is not None)
        evidence["canary_note"] = (
            f"only {stamped} events carry a server send time: TARGET does not look like"
            " promptpath serve (judged blind)"
            if stamped < d.content_events
            else "too few stamped events for hold statistics (judged blind)"
        )
    hold_verdict = None
    held = ""
    if holds is not None:
        hold_verdict, held, facts = _canary_facts(holds)
        evidence.update(facts)
        if d.pattern is None:
            bursty = hold_verdict in (Verdict.WARN, Verdict.FAIL)
            evidence["pattern"] = (
                ("bursts" if holds.flushes >= 2 else "whole") if bursty else "streamed"
            )
        verdict = hold_verdict if d.pattern != "whole" else Verdict.FAIL
        summary = f"{summary}; {held}" if d.pattern is not None else held
    encoding = signs.get("content_encoding")
    mechanism = classify(
        timeline,
        d,
        together,
        encoding=encoding if isinstance(encoding, str) else None,
        hold_verdict=hold_verdict,
        provider_hold=provider_hold,
    )
    if mechanism is not None:
        # The mechanism grades the hop; the holds and silences it shows are its evidence.
        verdict = mechanism.verdict
        summary = f"{mechanism.said}; {held}" if held else mechanism.said
        evidence["mechanism"] = {
            "kind": mechanism.kind,
            "grade": mechanism.grade,
            **mechanism.facts,
        }
        evidence["buffer_size_bytes"] = mechanism.facts.get("block_bytes")
        shape = mechanism.facts.get("shape", mechanism.kind)
        if shape == "whole_response":
            evidence["pattern"] = "whole"
        elif shape != "irregular_bursts" or evidence["pattern"] not in ("bursts", "whole"):
            evidence["pattern"] = "bursts"
        if len(mechanism.flushes) > len(d.bursts):
            # Flushes closer together than delivery's 150 ms silence (a 4 KiB buffer at
            # 100 tokens/s flushes every ~130 ms): list the ones the mechanism saw.
            evidence.update(_bursts_evidence(timeline, mechanism.flushes))
    blame, blame_facts = blamed_hop(timeline.response_headers)
    if mechanism is not None and mechanism.kind == "provider_guardrail":
        blame = f"the provider ({mechanism.facts['provider']}), not a hop on the path"
        blame_facts = {"hop": None, "named_by": [], "provider": mechanism.facts["provider"]}
    timer = mechanism is not None and mechanism.kind == "time_coalescing"
    if timer and blame_facts["hop"] is None and not canary:
        # Without send stamps a timer in the origin's own writes looks the same.
        blame += ", or the origin's own write timer (blind mode cannot tell; --canary can)"
    by_provider = mechanism is not None and mechanism.kind == "content_filter"
    if verdict in (Verdict.WARN, Verdict.FAIL) and not by_provider:
        summary += f"; at {blame}"
        evidence["blamed_hop"] = blame_facts
    if d.content_events < MIN_EVENTS and holds is None:
        summary += f"; {short_stream_note(timeline, d.content_events, max_tokens)}"
    for_client = isinstance(encoding, str) and for_this_client(encoding, offered)
    if isinstance(encoding, str):
        judged = evidence["pattern"] if verdict is not Verdict.SKIP else None
        evidence["compression"] = compression_facts(encoding, offered, judged)
    # Hop settings are advised on what the delivery showed; the header signs bring their own.
    named = [h["hop"] for h in hops_between(timeline.response_headers)]
    advice = _advice(verdict, named, signs, mechanism, for_client=for_client)
    # Content-Length or compression on an event stream is evidence on its own: never a
    # pass, never a skip, however few events arrived; except compression the client asked
    # for on a stream seen to arrive as it was sent.
    headers_say = header_phrase(signs, for_client=for_client)
    if verdict in (Verdict.WARN, Verdict.FAIL) and isinstance(encoding, str):
        summary += f"; {header_phrase({'content_encoding': encoding}, for_client=for_client)}"
    if for_client and verdict == Verdict.PASS and "content_length" not in signs:
        summary += f", compressed with {encoding} for this client without holding events back"
    elif headers_say is not None and verdict in (Verdict.SKIP, Verdict.PASS):
        if verdict == Verdict.SKIP:
            summary = f"{headers_say}; the delivery itself could not be judged: {summary}"
        else:
            summary += f", but {headers_say}: a buffering risk"
        verdict = Verdict.WARN
    lead = ""
    if mechanism is not None and verdict in (Verdict.WARN, Verdict.FAIL):
        # The provider's own hold names no hop, whatever a Via header says.
        lead = mechanism.lead + ("" if by_provider else named_in(blame_facts))
    return Finding(
        probe=PROBE, verdict=verdict, summary=summary, evidence=evidence, advice=advice, lead=lead
    )
