"""The ``hol`` probe: N streams at once on one HTTP/2 connection against N on N connections.

It runs the load mode's pool (``tracer.load.run_concurrent``): N prompts on one HTTP/2
connection (``connections=1``) and, at the same time, N prompts each on its own HTTP/2
connection (``connections=N``); then, when the endpoint offers HTTP/3 on the target's
port (the trace's Alt-Svc or HTTPS record, ``tracer.h3discovery``) or the trace used it,
N prompts on one HTTP/3 connection. Both TCP groups run at once so that whatever holds
back every stream alike (the server, this machine's CPU) shows in both and is not taken
for the shared connection's.

The pace: with --canary the endpoint sends CANARY_TOKENS tokens at CANARY_RATE per second,
one per event (a 20 ms cadence: a retransmission of a round trip or more stands out);
otherwise the dialect's stream as it comes, a counting prompt within --max-tokens, and the
cadence is the streams' own median gap. ``hol.measure`` finds the stalls and co-stalls,
``hol.verdict`` judges them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio

from promptpath.core.findings import Finding
from promptpath.core.timeline import Timeline
from promptpath.options import RunOptions
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.canary import canary_controls, check_controls, paced_request, skipped
from promptpath.probes.hol.measure import (
    GroupMeasure,
    Span,
    Stream,
    cadence_ms,
    floor_ms,
    measure_group,
    pauses,
    stall_threshold_ms,
    stream_of,
)
from promptpath.probes.hol.verdict import PROBE, HolMeasure, judge, not_judged
from promptpath.probes.settings import CanarySettings
from promptpath.result import TraceResult

COUNT_PROMPT = "Count from 1 to 200, one number per line."
#: The canary's pace: 200 tokens at 50/s, one per event (4 s a stream). At 2 % loss each
#: way over a 40 ms round trip this gives the shared connection several losses a run
#: (the lab test's figures), and its 20 ms cadence sits well under a retransmission.
CANARY_TOKENS = 200
CANARY_RATE = 50.0


def probe_request(options: RunOptions, canary: CanarySettings) -> RunOptions:
    """The probe's own prompt: a paced canary stream, or a counting prompt."""
    return paced_request(
        options, COUNT_PROMPT, tokens=CANARY_TOKENS, rate=CANARY_RATE, canary=canary
    )


CANARY_CONTROLS = canary_controls(tokens=CANARY_TOKENS, rate=CANARY_RATE)


def cannot_measure(options: RunOptions) -> str | None:
    """Why this target's streams cannot share an HTTP/2 connection here, if they cannot."""
    target = options.target
    if target.websocket:
        return "a WebSocket target: its messages travel in one stream of their own"
    if target.scheme == "http" and options.http != "2":
        return (
            "a cleartext http:// target speaks HTTP/1.1 unless told otherwise: add --http 2"
            " if it takes HTTP/2 with prior knowledge (h2c)"
        )
    return None


def http3_plan(options: RunOptions, result: TraceResult | None) -> tuple[bool, str | None]:
    """Whether to run the HTTP/3 group, and why not when not."""
    if options.target.scheme != "https":
        return False, "a cleartext target (QUIC always runs TLS)"
    if options.proxy is not None:
        return False, "the run goes through a proxy, which QUIC does not cross"
    if options.http == "3":
        return True, None
    h3: dict[str, Any] | None = None if result is None else result.h3
    if h3 is None or h3.get("advertised_by") is None:
        return False, "the endpoint did not offer it (no Alt-Svc h3, no HTTPS record)"
    host, port = h3.get("host"), h3.get("port")
    same_host = host is None or str(host).lower() == options.target.host.lower()
    if not same_host or port != options.target.port:
        return False, (
            f"offered at {h3.get('authority')} ({h3.get('advertised_by')}), not on the"
            " target's own host and port, which the probe dials"
        )
    return True, None


def _ignore(index: int, result: TraceResult) -> None:
    return None


async def _group(options: RunOptions, streams: int, connections: int) -> list[TraceResult]:
    from promptpath.tracer.load import run_concurrent

    return await run_concurrent(
        options, count=streams, concurrency=streams, connections=connections, on_run=_ignore
    )


async def run_tcp_groups(
    options: RunOptions, streams: int
) -> tuple[list[TraceResult], list[TraceResult]]:
    """N streams on one HTTP/2 connection and N on N connections, all at the same time."""
    from promptpath.tracer.session import gc_held

    done: dict[str, list[TraceResult]] = {}

    async def one(label: str, connections: int) -> None:
        done[label] = await _group(options, streams, connections)

    # Held here around both: each group's own hold would re-enable the collector when the
    # first of them ends, under the other's streams.
    with gc_held():
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "shared", 1)
            tg.start_soon(one, "separate", streams)
    return done["shared"], done["separate"]


def _ok(result: TraceResult) -> bool:
    return result.exc is None and result.timeline.stream_end == "marker"


def _first_error(results: list[TraceResult]) -> str | None:
    return next((r.exc.message for r in results if r.exc is not None), None)


def _version(results: list[TraceResult]) -> str | None:
    return next((r.timeline.http_version for r in results if r.timeline.http_version), None)


def fastest_connect_ms(timelines: list[Timeline]) -> float | None:
    """The fastest TCP connect of these streams' connections: a round trip, or near it."""
    spans = [
        stage.duration_ns / 1e6
        for tl in timelines
        if (stage := tl.stage("connect")) is not None and stage.duration_ns is not None
    ]
    return min(spans) if spans else None


#: The stages of the stream that opened a connection (the others on it have none).
OPENING = ("connect", "proxy_connect", "quic_handshake")


def opened(results: list[TraceResult]) -> int:
    """The connections these streams opened, as their timelines show it."""
    return sum(
        any(st.name in OPENING and st.end_ns is not None for st in r.timeline.stages)
        for r in results
    )


def streams_of(results: list[TraceResult]) -> list[Stream]:
    return [stream_of(r.timeline, ok=_ok(r)) for r in results]


def measure(
    label: str, results: list[TraceResult], threshold: float, exclude: Sequence[Span] = ()
) -> GroupMeasure:
    return measure_group(
        label,
        streams_of(results),
        threshold,
        http_version=_version(results),
        connections=opened(results),
        error=_first_error(results),
        exclude=exclude,
    )


@register
class HolProbe(Probe):
    name = PROBE
    description = "do stalls on one HTTP/2 connection hold back all its streams at once?"

    def cost(self, ctx: ProbeContext) -> Cost:
        if cannot_measure(ctx.options) is not None:
            return Cost()
        opts = probe_request(ctx.options, ctx.settings.canary)
        n = ctx.settings.hol.streams
        # Before the trace (the spend check) the HTTP/3 group counts whenever it may run.
        h3 = (
            http3_plan(ctx.options, ctx.result)[0]
            if ctx.result is not None
            else ctx.options.target.scheme == "https" and ctx.options.proxy is None
        )
        groups = 3 if h3 else 2
        return Cost(
            requests=groups * n,
            tokens=groups * n * opts.max_tokens,
            seconds=(2 if h3 else 1) * opts.timeout,
        )

    async def run(self, ctx: ProbeContext) -> Finding:
        why_not = cannot_measure(ctx.options)
        if why_not is not None:
            return not_judged(why_not)
        canary = ctx.settings.canary
        opts = probe_request(ctx.options, canary)
        tcp = opts.derive(http="2")
        n = ctx.settings.hol.streams
        pace = (
            f"{CANARY_TOKENS} tokens at {CANARY_RATE:g}/s from the canary"
            if canary.on
            else f"≤ {opts.max_tokens} tokens each, as the stream comes"
        )
        ctx.progress(
            f"hol: {n} streams on one HTTP/2 connection and {n} on {n} connections at once, {pace}"
        )
        shared, separate = await run_tcp_groups(tcp, n)
        context: dict[str, object] = {
            "request": {
                "max_tokens": opts.max_tokens,
                "canary_rate": CANARY_RATE if canary.on else None,
                "client": opts.client,
            }
        }
        if canary.on:
            first = shared[0].timeline
            check = check_controls(first, CANARY_CONTROLS, canary.controls, rate=CANARY_RATE)
            if not check.ok:
                return skipped(PROBE, check, context)
            context["controls"] = check.evidence()
        run_h3, h3_note = http3_plan(ctx.options, ctx.result)
        h3_results: list[TraceResult] | None = None
        if run_h3:
            ctx.progress(f"hol: {n} streams on one HTTP/3 connection")
            from promptpath.tracer.session import gc_held

            with gc_held():
                h3_results = await _group(opts.derive(http="3"), n, 1)
        rtt = fastest_connect_ms([r.timeline for r in (*shared, *separate)])
        if canary.on:
            cadence: float | None = 1000.0 / CANARY_RATE
        else:
            cadence = cadence_ms(streams_of([*shared, *separate]))
        threshold = None if cadence is None else stall_threshold_ms(cadence, rtt)
        # With no cadence (no stream had two arrivals) no gap is a stall: the verdict skips.
        limit = float("inf") if threshold is None else threshold
        # What held every stream of both TCP groups at once was not either connection.
        paused = pauses(streams_of([*shared, *separate]), limit)
        return judge(
            HolMeasure(
                streams=n,
                shared=measure("shared", shared, limit, paused),
                separate=measure("separate", separate, limit, paused),
                pauses_ms=tuple((b - a) / 1e6 for a, b in paused),
                http3=None if h3_results is None else measure("http3", h3_results, limit),
                http3_note=h3_note,
                cadence_ms=cadence,
                cadence_source="canary" if canary.on else "measured",
                floor_ms=floor_ms(rtt),
                rtt_ms=rtt,
                threshold_ms=threshold,
                context=context,
            )
        )
