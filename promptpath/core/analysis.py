"""Metrics from a Timeline, as README.md "What the numbers mean" defines them.

Pure: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from promptpath.core.coalescing import coalescing
from promptpath.core.rtt import network_adjusted
from promptpath.core.stats import Summary, intervals_ms, summarize
from promptpath.core.stopped import PolicyStop, policy_stop, said
from promptpath.core.timeline import (
    CONNECT_STAGES,
    FILTER_EVENTS,
    MILESTONES,
    USAGE_COUNTS,
    Timeline,
    Usage,
    content_events,
    is_visible,
)

#: Waterfall stages derived from milestones: (name, from, to). "ready" is the moment the
#: connection could carry the request: TLS done, else TCP connected, else the end of a
#: load-mode wait for a connection, else t0 (reused).
DERIVED_STAGES = (
    ("request", "ready", "request_sent"),
    ("wait", "request_sent", "ttfb"),
    ("first_token", "ttfb", "ttft"),
    ("streaming", "ttft", "last_token"),
)


#: The derived stage a failure in each error stage left open: it runs to the error.
_OPEN_AT_ERROR = {
    "request": "request",
    "wait": "wait",
    "first_token": "first_token",
    "stream": "streaming",
}


def derived_bounds(timeline: Timeline) -> dict[str, tuple[int, int]]:
    """Start and end stamps of the stages after the connection, back to back, so the
    stage durations add up to the milestones (nothing the client did falls between).

    When an error ended the trace, the stage it cut runs to the error's stamp (a timeout:
    the deadline), so the time lost waiting shows as that stage's duration."""
    m = dict(timeline.milestones)
    # A load-mode stream that waited for a connection it then reused is ready when the
    # wait ended: the request stage must not count the queue a second time.
    queue = timeline.stage("queue")
    waited = queue.end_ns if queue is not None and queue.end_ns is not None else None
    m["ready"] = m.get("tls_done", m.get("connected", waited or timeline.t0_ns))
    err = timeline.error
    cut = None if err is None or err.t_ns is None else _OPEN_AT_ERROR.get(err.stage)
    bounds: dict[str, tuple[int, int]] = {}
    for name, start, end in DERIVED_STAGES:
        if name == cut and start in m and err is not None and err.t_ns is not None:
            # Never negative: the stage may have begun after the deadline (the loop was
            # late to cancel, or the deadline passed before the first step).
            bounds[name] = (m[start], max(m[start], err.t_ns, m.get(end, err.t_ns)))
        elif start in m and end in m:
            bounds[name] = (m[start], m[end])
    return bounds


#: Stage keys in waterfall order (the proxy's own stages first): every reporter draws them so.
#: The recorded set-up stages as the timeline names them (a load-mode stream's queue aside:
#: no waterfall draws it), then the spans between milestones.
WATERFALL_STAGES: tuple[str, ...] = (
    *(stage for stage in CONNECT_STAGES if stage != "queue"),
    *(name for name, _start, _end in DERIVED_STAGES),
)


def stage_spans(timeline: Timeline) -> list[tuple[str, float, float]]:
    """(stage, start_ms, end_ms) on the t0 axis for each stage that happened, in
    waterfall order: the recorded stages as stamped, the derived ones back to back."""
    derived = derived_bounds(timeline)
    spans: list[tuple[str, float, float]] = []
    for key in WATERFALL_STAGES:
        stage = timeline.stage(key)
        if stage is not None and stage.end_ns is not None:
            bounds: tuple[int, int] | None = (stage.start_ns, stage.end_ns)
        else:
            bounds = derived.get(key)
        if bounds is not None:
            start, end = ((b - timeline.t0_ns) / 1e6 for b in bounds)
            spans.append((key, start, end))
    return spans


def open_stage_at_error(timeline: Timeline) -> str | None:
    """The derived stage the error cut short (it ran to the error), if one was open."""
    err = timeline.error
    cut = None if err is None or err.t_ns is None else _OPEN_AT_ERROR.get(err.stage)
    return cut if cut is not None and cut in derived_bounds(timeline) else None


def final_silence_ns(timeline: Timeline) -> int | None:
    """How long nothing arrived before the error ended a trace that had a response: from
    the last byte read (or the headers) to the error's stamp."""
    err = timeline.error
    if err is None or err.t_ns is None or err.stage not in ("wait", "first_token", "stream"):
        return None
    closing = timeline.closing_ns  # the reads after our own close are not the stream's
    last_read = timeline.last_read_ns if closing is None else timeline.last_read_until(closing)
    last = [] if last_read is None else [last_read]
    last += [timeline.milestones[k] for k in ("request_sent", "ttfb") if k in timeline.milestones]
    # A read stamped after the deadline (the loop was late to cancel) is no silence.
    return max(0, err.t_ns - max(last)) if last else None


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenMetrics:
    count: int
    count_source: str  # "usage" (server's own count) or "events" (content events seen)
    events: int  # content-bearing events
    all_events: int  # every decoded event, comments included
    #: content events the path delivered in one read with the previous one (core.coalescing)
    coalesced: int
    per_second: float | None
    mean_itl_ms: float | None
    gaps: list[float]  # ms between consecutive content events
    gap_summary: Summary | None
    content_types: dict[str, int]
    hidden_reasoning: int = 0  # reasoning tokens the server counted but did not stream
    #: False when an error cut the body (the rate and gaps cover only what arrived).
    finished: bool = True
    #: The open gap an error cut: last content event to the error (a timeout: the deadline).
    stall_ms: float | None = None
    #: events that shared a read with the previous one only because they were sent back to
    #: back or our read loop caught them together: not the path's doing
    read_batched: int = 0
    #: of read_batched, events in a read counted past the cap of kept reads: not judged
    coalesced_unjudged: int = 0
    #: events of a content filter (core.timeline.FILTER_EVENTS): no token, no error
    filter_events: int = 0
    #: the content types of the events before the first visible text ("reasoning",
    #: "reasoning+tool"), "" when the answer's text came first or never came
    before_output: str = ""
    #: the server's usage counts no request can have (Usage.untrusted): none is counted
    usage_untrusted: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Metrics:
    stages_ms: dict[str, float]
    milestones_ms: dict[str, float]
    ttft_from_request_ms: float | None
    closed_ms: float | None
    tokens: TokenMetrics
    mostly_coalesced: bool
    #: The first answer text a user sees (first_output), from the request's last byte,
    #: and after the first content of any kind (ttft): 0 when the answer came first,
    #: the reasoning's (or tool call's) lead when something else did.
    first_output_from_request_ms: float | None = None
    first_output_after_ttft_ms: float | None = None
    #: The provider's content policy ended the answer (a finish reason, not an error).
    stopped: PolicyStop | None = None
    #: The round trip subtracted (core/rtt.py: the connection's minimum; None through a
    #: proxy or where none was read), and TTFT / first output from the request less it.
    rtt_ms: float | None = None
    ttft_network_adjusted_ms: float | None = None
    first_output_network_adjusted_ms: float | None = None

    @property
    def output_lead(self) -> str | None:
        """What came before the answer's first text, when something did: ``reasoning``,
        ``tool`` (the content types of the events before first_output)."""
        return self.tokens.before_output or None


def _usage(timeline: Timeline) -> tuple[int | None, int]:
    """The server's own output-token count, and how many of those were reasoning tokens
    (None: no count to go by, or its last one was impossible)."""
    reported = reported_usage(timeline)
    if reported is None or "output_tokens" in reported.untrusted:
        return None, 0
    usages = [e.usage for e in timeline.events if e.usage and e.usage.output_tokens]
    if not usages:
        return None, 0
    last = usages[-1]
    return last.output_tokens, last.reasoning_tokens or 0


def reported_usage(timeline: Timeline) -> Usage | None:
    """The token counts the server reported, each the last one it sent (Anthropic gives
    the input count in ``message_start`` and the output count in ``message_delta``); a
    count whose last word was impossible is named in ``untrusted`` instead."""
    counts: dict[str, int | None] = {}
    apart = False
    for event in timeline.events:
        if event.usage is None:
            continue
        apart = apart or event.usage.cached_apart
        for name in USAGE_COUNTS:
            value = getattr(event.usage, name)
            if value is not None:
                counts[name] = value
            elif name in event.usage.untrusted:
                counts[name] = None
    if not counts:
        return None
    untrusted = tuple(name for name in USAGE_COUNTS if name in counts and counts[name] is None)
    kept = {name: value for name, value in counts.items() if value is not None}
    return Usage(**kept, untrusted=untrusted, cached_apart=apart)


def response_model(timeline: Timeline) -> str | None:
    """The model the stream says answered (the first event that names one)."""
    return next((e.model for e in timeline.events if e.model), None)


def token_metrics(timeline: Timeline) -> TokenMetrics:
    content = content_events(timeline.events)
    gaps = intervals_ms([e.t_ns for e in content])
    together = coalescing(timeline)
    types: dict[str, int] = {}
    for e in content:
        key = e.content_type or "text"
        types[key] = types.get(key, 0) + 1
    usage, reasoning = _usage(timeline)
    reported = reported_usage(timeline)
    hidden = 0
    if usage is not None and reasoning and "reasoning" not in types:
        # o-series models count reasoning they never stream: those tokens were generated
        # before the first visible one, so they do not belong in the streamed rate.
        hidden = min(reasoning, usage)
    # Past the ingest's cap, content events are counted, not kept (Timeline.not_kept):
    # they count as tokens, and the last_token milestone is the last of them.
    seen = len(content) + timeline.not_kept.content
    count, source = (usage - hidden, "usage") if usage is not None else (seen, "events")
    last_ns = timeline.milestones.get("last_token", content[-1].t_ns) if content else None
    per_second = mean_itl = None
    if last_ns is not None and seen >= 2 and count >= 2:
        span_ns = last_ns - content[0].t_ns
        if span_ns > 0:
            mean_itl = span_ns / 1e6 / (count - 1)
            per_second = 1000.0 / mean_itl
    err = timeline.error
    stall = None
    # Cut while decoding what had arrived (timeline.decoding): no silence was open. A
    # token stamped after the deadline (the loop was late to cancel) left no gap either.
    if last_ns is not None and err is not None and err.t_ns is not None:
        stalled = err.stage == "stream" and not timeline.decoding
        stall = round(max(0, err.t_ns - last_ns) / 1e6, 3) if stalled else None
    before: list[str] = []
    for e in content:
        if is_visible(e):
            break
        if (e.content_type or "text") not in before:
            before.append(e.content_type or "text")
    else:
        before = []  # no answer text at all: nothing came "before" it
    return TokenMetrics(
        before_output="+".join(before),
        finished=err is None or err.stage not in ("first_token", "stream"),
        stall_ms=stall,
        count=count,
        count_source=source,
        events=seen,
        all_events=len(timeline.events) + timeline.not_kept.events,
        filter_events=sum(1 for e in timeline.events if e.name in FILTER_EVENTS),
        coalesced=together.path,
        read_batched=together.read_loop,
        coalesced_unjudged=together.unjudged,
        per_second=per_second,
        mean_itl_ms=mean_itl,
        gaps=gaps,
        gap_summary=summarize(gaps),
        content_types=types,
        hidden_reasoning=hidden,
        usage_untrusted=() if reported is None else reported.untrusted,
    )


def compute(timeline: Timeline) -> Metrics:
    ms = timeline.ms
    stages: dict[str, float] = {}
    for stage in timeline.stages:
        if stage.end_ns is not None and stage.name not in stages:
            stages[stage.name] = round((stage.end_ns - stage.start_ns) / 1e6, 3)
    m = timeline.milestones
    for name, (start_ns, end_ns) in derived_bounds(timeline).items():
        stages[name] = round((end_ns - start_ns) / 1e6, 3)
    milestones = {
        name: round(value, 3)
        for name in MILESTONES
        if name in m and (value := ms(m[name])) is not None
    }
    ttft_req = None
    if "ttft" in m and "request_sent" in m:
        ttft_req = round((m["ttft"] - m["request_sent"]) / 1e6, 3)
    output_req = output_lead = None
    if "first_output" in m:
        if "request_sent" in m:
            output_req = round((m["first_output"] - m["request_sent"]) / 1e6, 3)
        output_lead = round((m["first_output"] - m["ttft"]) / 1e6, 3)
    tokens = token_metrics(timeline)
    mostly = tokens.events >= 4 and tokens.coalesced >= (tokens.events - 1) / 2
    closed = ms(timeline.closed_ns)
    rtt = None if timeline.rtt is None else timeline.rtt.used_ms
    rtt = None if rtt is None else round(rtt, 3)
    return Metrics(
        stages_ms=stages,
        milestones_ms=milestones,
        ttft_from_request_ms=ttft_req,
        closed_ms=None if closed is None else round(closed, 3),
        tokens=tokens,
        mostly_coalesced=mostly,
        first_output_from_request_ms=output_req,
        first_output_after_ttft_ms=output_lead,
        stopped=policy_stop(timeline.events),
        rtt_ms=rtt,
        ttft_network_adjusted_ms=network_adjusted(ttft_req, rtt),
        first_output_network_adjusted_ms=network_adjusted(output_req, rtt),
    )


def _duration(ms: float) -> str:
    return f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms:.0f} ms"


def output_note(metrics: Metrics) -> str | None:
    """When the first content was not the answer: how much later the answer's first
    text came ("first output 1500 ms, 1.2 s after the first reasoning"), or that none did.
    None when the first content was answer text (ttft is first_output) or none came."""
    ms = metrics.milestones_ms
    if "ttft" not in ms:
        return None
    if "first_output" not in ms:
        kinds = " and ".join(sorted(metrics.tokens.content_types)) or "content"
        return f"no answer text arrived (only {kinds})"
    lead = metrics.first_output_after_ttft_ms
    before = metrics.tokens.before_output
    if not before or lead is None:
        return None
    return (
        f"first output {ms['first_output']:.0f} ms, {_duration(lead)} after the first"
        f" {before.replace('+', ' and ')}"
    )


def _timeout_verdict(timeline: Timeline) -> str | None:
    """Where a timeout's time went once a response was under way: one silence (a stall),
    or bytes still dribbling in at the deadline (a trickle)."""
    err = timeline.error
    silence = final_silence_ns(timeline)
    if err is None or err.kind != "timeout" or err.t_ns is None or silence is None:
        return None
    timeout_s = err.detail.get("timeout_s")
    deadline = (
        f"the {timeout_s:g} s deadline" if isinstance(timeout_s, float | int) else "the deadline"
    )
    if timeline.decoding:
        # The bytes had arrived; the client was still turning them into events.
        wire = timeline.body_bytes
        events = len(timeline.events) + timeline.not_kept.events
        return (
            f"still decoding at {deadline}: {wire} bytes read had become"
            f" {timeline.decoded_bytes} bytes and {events} events so far"
            + (f" ({timeline.compressed}: a compression bomb?)" if timeline.compressed else "")
        )
    cut = open_stage_at_error(timeline)
    start = derived_bounds(timeline)[cut][0] if cut is not None else err.t_ns - silence
    # A silence shorter than half the stage: data was still coming, just too slowly.
    if 2 * silence < err.t_ns - start:
        nbytes, exact = timeline.read_bytes_after(start, timeline.closing_ns)
        span_s = (err.t_ns - start) / 1e9
        return (
            f"still trickling ({'' if exact else 'up to '}{nbytes} bytes in {span_s:.2f} s of stage"
            f" {err.stage}, the last {silence / 1e9:.2f} s before the end): the stream"
            f" never finished within {deadline}"
        )
    return f"no byte for {silence / 1e9:.2f} s in stage {err.stage}, then {deadline}"


def headline(timeline: Timeline, metrics: Metrics) -> str:
    """One line a person can paste into a ticket: where the time went, or what broke.

    The measurement alone; ``core/verdict.py`` puts the findings and SLOs in front."""
    failed = failure_line(timeline, metrics)
    return failed if failed is not None else "OK: " + where_time_went(timeline, metrics)


def failure_line(timeline: Timeline, metrics: Metrics) -> str | None:
    """``FAILED in STAGE: what broke, last milestone …``; None when the run did not fail."""
    err = timeline.error
    if err is None:
        return None
    ms = metrics.milestones_ms
    reached = [name for name in MILESTONES if name in ms]
    last = f", last milestone {reached[-1]} at {ms[reached[-1]]:.0f} ms" if reached else ""
    timed_out = _timeout_verdict(timeline)
    if timed_out is not None:
        return f"FAILED in {err.stage}: {timed_out}{last}"
    return f"FAILED in {err.stage}: {err.message}{last}"


def where_time_went(timeline: Timeline, metrics: Metrics) -> str:
    """A run that completed, in figures: first token, setup, rate, gaps, what was odd."""
    ms = metrics.milestones_ms
    st = metrics.stages_ms
    setup = sum(st.get(k, 0.0) for k in ("dns", "connect", "tls", "quic_handshake"))
    ttft = ms.get("ttft")
    tok = metrics.tokens
    parts: list[str] = []
    if ttft is not None:
        server_wait = metrics.ttft_from_request_ms or 0.0
        share = 100.0 * server_wait / ttft if ttft > 0 else 0.0
        parts.append(
            f"first token after {ttft:.0f} ms ({server_wait:.0f} ms after the request was sent,"
            f" {share:.0f}% of it; connection setup {setup:.0f} ms)"
        )
    else:
        parts.append("no content token arrived")
    note = output_note(metrics)
    if note is not None:
        parts.append(note)
    if metrics.stopped is not None:
        parts.append(said(metrics.stopped))
    if tok.per_second is not None:
        parts.append(f"{tok.per_second:.1f} tok/s")
    if tok.gap_summary is not None:
        parts.append(f"gap p99 {tok.gap_summary.p99:.0f} ms")
    if metrics.mostly_coalesced:
        parts.append(
            f"{tok.coalesced}/{tok.events} tokens arrived coalesced (per-token gaps hidden)"
        )
    if timeline.compressed:
        parts.append(f"stream compressed with {timeline.compressed} (a buffering risk)")
    bad = timeline.invalid_utf8
    if bad.replacements:
        parts.append(
            f"{bad.replacements} invalid UTF-8 sequence(s) in {bad.events} event(s),"
            " shown as U+FFFD (a hop that splits or recodes bytes?)"
        )
    return ", ".join(parts)
