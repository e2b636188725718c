"""Buffering verdict: from one traced stream's stamps to a Finding. Pure: no clock, no I/O.

Blind mode (any endpoint) reads only arrival stamps. A buffering hop shows as *flushes*:
after a silence, many events land in one or two socket reads (coalesced), because the
hop held them until its buffer filled (bursts, sizes near 4/8 KiB) or the response ended
(whole). A streaming path delivers events one read at a time, spread over the answer.

Canary mode (the target is ``promptpath serve``) also has each event's server send time:
the *hold* of an event is its arrival lag minus the smallest lag seen, so it needs no
clock agreement between the machines. Holds that grow through a burst and collapse at
each flush are buffering measured directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Literal

from promptpath.findings import Finding, Verdict
from promptpath.stats import percentile
from promptpath.timeline import StreamEvent, Timeline

Pattern = Literal["streamed", "bursts", "whole"]

PROBE = "buffering"
MIN_EVENTS = 20  # content events needed before delivery can be judged
UNIT_WINDOW_NS = 10_000_000  # reads within 10 ms of a delivery's first read belong to it
SILENCE_NS = 150_000_000  # a flush follows at least this much silence
CHAIN_NS = 75_000_000  # a dense delivery this close behind a flush continues it (TCP windows)
MIN_FLUSH_EVENTS = 3  # ... and brings at least this many content events
MIN_COALESCE = 2.0  # ... at least this many per read (a fast server sends one per read)
WHOLE_SHARE = 0.8  # one burst carrying this share of the events: delivered whole
BURST_SHARE = 0.6  # bursts carrying this share: delivered in bursts
MIN_UNITS_STREAMED = 10  # separate deliveries needed to call a stream streamed
MIN_JUDGE_NS = 250_000_000  # an answer complete sooner than this cannot show a buffer
FAIL_SILENCE_MS = 500.0  # bursts this far apart are what users call "arrives in blocks"
HOLD_WARN_P90_MS = 150.0
HOLD_FAIL_P50_MS = 250.0
HOLD_FAIL_P90_MS = 1000.0
HOLD_JUMP_MS = 100.0  # a hold this much above the previous event's: a new burst began
CLOCK_SLACK_NS = 50_000_000  # lags below -50 ms: the two machines' clocks disagree
BUFFER_SIZES = (4096, 8192, 16384, 32768, 65536)
MAX_LISTED = 20  # bursts/silences listed in the evidence


# -- delivery structure ----------------------------------------------------------------
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


def _anchor(timeline: Timeline) -> int:
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
    prev_end = _anchor(timeline)
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
    content = sum(1 for e in timeline.events if e.kind == "content")
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
        want = max(2 * MIN_EVENTS, 64)
        return made(
            None,
            f"only {content} content events arrived: too few to tell streaming from buffering"
            f" (need ≥ {MIN_EVENTS}; raise --max-tokens to ≥ {want})",
        )
    in_bursts = sum(b.nevents for b in bursts)
    biggest = max(bursts, key=lambda b: b.nevents, default=None)
    if biggest is not None and biggest.nevents >= WHOLE_SHARE * content:
        took = biggest.end_ns - _anchor(timeline)
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


# -- header hints ----------------------------------------------------------------------
#: (header, substring of its value or "" for any, the hop it names)
_HOP_HEADERS: tuple[tuple[str, str, str], ...] = (
    ("server", "nginx", "nginx"),
    ("server", "openresty", "nginx"),
    ("server", "caddy", "caddy"),
    ("server", "envoy", "envoy"),
    ("server", "cloudflare", "cloudflare"),
    ("server", "awselb", "aws-elb"),
    ("server", "apache", "apache"),
    ("server", "haproxy", "haproxy"),
    ("server", "varnish", "varnish"),
    ("server", "hypercorn", "promptpath serve (hypercorn)"),
    ("via", "cloudfront", "cloudfront"),
    ("via", "varnish", "varnish"),
    ("via", "caddy", "caddy"),
    ("via", "google", "google-lb"),
    ("via", "", "proxy (Via)"),
    ("x-cache", "", "cache (X-Cache)"),
    ("x-varnish", "", "varnish"),
    ("x-served-by", "cache", "fastly"),
    ("cf-ray", "", "cloudflare"),
    ("x-amz-cf-id", "", "cloudfront"),
    ("x-envoy-upstream-service-time", "", "envoy"),
    ("x-azure-ref", "", "azure-front-door"),
    ("x-kong-proxy-latency", "", "kong"),
)


def header_hints(headers: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """Response headers that name a hop (Server, Via, X-Cache, CDN ids)."""
    hints: list[dict[str, str]] = []
    for name, value in headers:
        key, low = name.lower(), value.lower()
        for header, needle, hop in _HOP_HEADERS:
            if key == header and needle in low:
                hints.append({"header": name, "value": value[:120], "hop": hop})
                break
    return hints


def hops_named(headers: Sequence[tuple[str, str]]) -> list[str]:
    seen: list[str] = []
    for hint in header_hints(headers):
        if hint["hop"] not in seen:
            seen.append(hint["hop"])
    return seen


def stream_signs(timeline: Timeline) -> dict[str, object]:
    """Header-level signs of a buffering hop on an event stream."""
    signs: dict[str, object] = {}
    if timeline.header("content-length") is not None:
        signs["content_length"] = timeline.header("content-length")
    encoding = (timeline.header("content-encoding") or "identity").strip().lower()
    if encoding != "identity":
        signs["content_encoding"] = encoding
    ttfb = timeline.milestones.get("ttfb")
    first_body = min((c.t_ns for c in timeline.chunks), default=None)
    if ttfb is not None and first_body is not None and first_body - ttfb <= 1_000_000:
        wait = ttfb - _anchor(timeline)
        if wait >= MIN_JUDGE_NS:
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


# -- the finding -----------------------------------------------------------------------
def _kib(n: float) -> str:
    return f"{n / 1024:.1f} KiB"


def _silences_ms(bursts: Sequence[Burst]) -> list[float]:
    """Silences before each burst but the first (that one includes the model's TTFT)."""
    return [round(b.silence_ns / 1e6, 1) for b in bursts[1:]]


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
    pattern: Pattern | None,
    verdict: Verdict,
    hops: Sequence[str],
    signs: dict[str, object],
    d: Delivery,
) -> list[str]:
    advice: list[str] = []
    if "content_encoding" in signs:
        advice.append(
            f"a hop compresses the event stream ({signs['content_encoding']}) although we asked"
            " for identity: exclude text/event-stream from compression (nginx gzip_types,"
            " caddy `encode` matcher, haproxy `compression type`)"
        )
    if "content_length" in signs:
        advice.append(
            "a hop sends Content-Length on an event stream: it buffered the whole response to"
            " count it; turn response buffering off for this path"
        )
    if verdict not in (Verdict.WARN, Verdict.FAIL):
        return advice
    silences = _silences_ms(d.bursts)
    # ~200-260 ms cadence without a buffer-sized burst: the kernel's MSG_MORE cork timer.
    coalescing = bool(silences) and percentile(silences, 50) < 300.0 and not d.buffer_size
    nginx = "nginx" in hops or d.buffer_size in (4096, 8192)
    caddy = "caddy" in hops
    haproxy = "haproxy" in hops or coalescing
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
    context: dict[str, object] | None = None,
) -> Finding:
    """The buffering finding for one traced stream (the probe's own request)."""
    d = delivery(timeline)
    signs = stream_signs(timeline)
    hints = header_hints(timeline.response_headers)
    hops = hops_named(timeline.response_headers)
    sizes = [b.nbytes for b in d.bursts]
    evidence: dict[str, object] = {
        "mode": "canary" if canary else "blind",
        "pattern": d.pattern,
        "content_events": d.content_events,
        "deliveries": len(d.units),
        "bursts": [
            {
                "t_ms": timeline.ms(b.start_ns),
                "bytes": b.nbytes,
                "events": b.nevents,
                "silence_before_ms": round(b.silence_ns / 1e6, 1),
            }
            for b in d.bursts[:MAX_LISTED]
        ],
        "burst_bytes": sizes[:MAX_LISTED],
        "silences_ms": _silences_ms(d.bursts)[:MAX_LISTED],
        "buffer_size_bytes": d.buffer_size,
        "header_hints": hints,
        "signs": signs,
        "hops": hops,
        **(context or {}),
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
    if holds is not None:
        hv = _hold_verdict(holds)
        h = holds.holds_ms
        evidence["added_delay_ms"] = {
            "p50": round(percentile(h, 50), 1),
            "p90": round(percentile(h, 90), 1),
            "p99": round(percentile(h, 99), 1),
            "max": round(max(h), 1),
        }
        evidence["flushes"] = holds.flushes
        evidence["clock"] = "synced" if holds.synced else "offset"
        evidence["floor_lag_ms"] = round(holds.floor_ms, 1) if holds.synced else None
        evidence["per_hop_note"] = (
            "added delay is for the whole chain between promptpath serve and this client;"
            " run the canary against each hop's address to split it per hop"
        )
        if d.pattern is None and hv in (Verdict.WARN, Verdict.FAIL):
            evidence["pattern"] = "bursts" if holds.flushes >= 2 else "whole"
        elif d.pattern is None:
            evidence["pattern"] = "streamed"
        verdict = hv if d.pattern != "whole" else Verdict.FAIL
        p50, p90 = evidence["added_delay_ms"]["p50"], evidence["added_delay_ms"]["p90"]  # type: ignore[index]
        held = (
            f"events held {p50:.0f} ms (p50) / {p90:.0f} ms (p90), up to {max(h):.0f} ms,"
            f" between promptpath serve and here"
        )
        summary = f"{summary}; {held}" if d.pattern is not None else held
        if holds.flushes:
            summary += f" ({holds.flushes} flushes)"
    if verdict in (Verdict.WARN, Verdict.FAIL):
        if hops:
            summary += f"; hops named by headers: {', '.join(hops)}"
        if d.buffer_size:
            summary += f" — a hop's {_kib(d.buffer_size)} buffer flushing when full"
    elif verdict == Verdict.PASS and signs.get("content_encoding"):
        verdict = Verdict.WARN
        summary += f", but a hop compresses it ({signs['content_encoding']}): a buffering risk"
    pattern = evidence["pattern"]
    advice = _advice(
        pattern if isinstance(pattern, str) else None,  # type: ignore[arg-type]
        verdict,
        hops,
        signs,
        d,
    )
    return Finding(probe=PROBE, verdict=verdict, summary=summary, evidence=evidence, advice=advice)
