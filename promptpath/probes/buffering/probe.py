"""The ``buffering`` probe: does a hop hold the stream back and deliver it in blocks?

It sends its own traced request for a stream long enough to show a buffer (a counting
prompt within --max-tokens; with --canary, a paced stream from ``promptpath serve``) and
hands the timeline to the pure verdict in ``buffering.verdict``. The request is shaped
like the user's client (--as): when it comes back compressed in a coding that client
accepts and held back, a second, identical request with ``Accept-Encoding: identity``
tells whether the compression is what holds it (``compression``).
"""

from __future__ import annotations

from promptpath.core.findings import Finding, Verdict
from promptpath.core.timeline import count_content
from promptpath.dialects.plugins import dialect
from promptpath.options import RunOptions
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.buffering.compression import wants_identity_check, with_identity_check
from promptpath.probes.buffering.mechanism import BEDROCK_GUARDRAIL_SYNC, ProviderHold
from promptpath.probes.buffering.verdict import PROBE, judge
from promptpath.probes.canary import canary_controls, check_controls, paced_request, skipped
from promptpath.probes.settings import CanarySettings
from promptpath.tracer.request import offered_encodings, sent_header


def provider_hold(opts: RunOptions) -> ProviderHold | None:
    """The batch-releasing check this request turns on at the provider, if any: a Bedrock
    guardrail in synchronous streaming mode (--guardrail, or its header given with -H)."""
    holds = dialect(opts.provider).holds_answer
    return BEDROCK_GUARDRAIL_SYNC if holds is not None and holds(opts) else None


COUNT_PROMPT = "Count from 1 to 200, one number per line."
#: Canary stream: slow enough that a 4 KiB buffer takes ~0.6 s to fill (events are
#: ~300 bytes), long enough for several flushes.
CANARY_TOKENS = 60
CANARY_RATE = 20.0
CANARY_CONTROLS = canary_controls(tokens=CANARY_TOKENS, rate=CANARY_RATE)


def probe_request(options: RunOptions, canary: CanarySettings) -> RunOptions:
    """The probe's own request: a long stream, never a warm second request."""
    return paced_request(
        options, COUNT_PROMPT, tokens=CANARY_TOKENS, rate=CANARY_RATE, canary=canary
    )


def identity_options(options: RunOptions) -> RunOptions:
    """The same request with only Accept-Encoding changed (-H wins over the shape)."""
    kept = (h for h in options.headers if h[0].lower() != "accept-encoding")
    return options.derive(headers=(*kept, ("Accept-Encoding", "identity")))


def requests_for(options: RunOptions) -> int:
    """One request; two when the client accepts compression (the identity comparison)."""
    return 2 if offered_encodings(options) else 1


@register
class BufferingProbe(Probe):
    name = PROBE
    description = "does a hop buffer the stream and deliver it in blocks?"

    def cost(self, ctx: ProbeContext) -> Cost:
        opts = probe_request(ctx.options, ctx.settings.canary)
        n = requests_for(opts)
        return Cost(requests=n, tokens=n * opts.max_tokens, seconds=n * opts.timeout)

    async def run(self, ctx: ProbeContext) -> Finding:
        opts = probe_request(ctx.options, ctx.settings.canary)
        canary = ctx.settings.canary.on
        if canary:
            ctx.progress(
                f"buffering: {CANARY_TOKENS} tokens at {CANARY_RATE:g}/s from the canary"
                f" (~{CANARY_TOKENS / CANARY_RATE:g} s), comparing send and arrival times"
            )
        else:
            ctx.progress(
                f"buffering: one counting stream of ≤ {opts.max_tokens} tokens, watching how"
                " its bytes arrive"
            )
        if requests_for(opts) > 1:
            ctx.progress(
                f"buffering: as {opts.client} (Accept-Encoding:"
                f" {sent_header(opts, 'accept-encoding')}); if the stream comes back"
                " compressed and held back, once more with Accept-Encoding: identity"
            )
        finding = await self._one(opts, ctx.settings.canary)
        if wants_identity_check(finding):
            ctx.progress("buffering: compressed and held back; the same request as identity")
            identity = await self._one(identity_options(opts), ctx.settings.canary)
            finding = with_identity_check(finding, identity)
        return finding

    async def _one(self, opts: RunOptions, settings: CanarySettings) -> Finding:
        from promptpath.tracer.orchestrator import trace

        canary = settings.on

        result = await trace(opts)
        tl = result.timeline
        content = count_content(tl.events)
        request: dict[str, object] = {
            "max_tokens": opts.max_tokens,
            "canary_rate": CANARY_RATE if canary else None,
            "http_version": tl.http_version,
            "status": tl.status,
            "client": opts.client,
            "accept_encoding": sent_header(opts, "accept-encoding"),
        }
        if tl.websocket is not None:
            # Each event is a message: a hop that holds them holds whole frames; deflate
            # (permessage-deflate) compresses each message on its own, holding none back.
            request["websocket"] = {
                "extensions": list(tl.websocket.extensions),
                "messages": tl.websocket.messages,
                "fragmented": tl.websocket.fragmented,
            }
        context: dict[str, object] = {"request": request}
        if canary:
            # A stream the canary did not pace as asked says nothing about the path.
            check = check_controls(tl, CANARY_CONTROLS, settings.controls, rate=CANARY_RATE)
            if not check.ok:
                return skipped(PROBE, check, context)
            context["controls"] = check.evidence()
        if result.exc is not None:
            context["error"] = result.exc.message
            if content == 0:
                return Finding(
                    probe=PROBE,
                    verdict=Verdict.ERROR,
                    summary=f"the probe's request failed: {result.exc.message}",
                    evidence=context,
                )
        return judge(
            tl,
            canary=canary,
            max_tokens=opts.max_tokens,
            context=context,
            offered=offered_encodings(opts),
            provider_hold=provider_hold(opts),
        )
