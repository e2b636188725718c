"""The ``prefill`` probe: the same question at several prompt sizes, interleaved and
repeated, to split TTFT into wire, fixed part and prefill; then the longest prompt twice
more, to see whether a prefix cache takes its prefill off.

I/O only: each request is a whole trace (tracer/), read back through core/analysis; the
fit and the words are the pure verdict's (verdict.py, fit.py).
"""

from __future__ import annotations

import dataclasses

from promptpath.core.analysis import compute, reported_usage
from promptpath.core.findings import Finding, Verdict
from promptpath.core.timeline import Timeline
from promptpath.dialects.plugins import dialect
from promptpath.options import RunOptions
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.prefill.prompts import cache_prefix, estimate_tokens, prompt_of
from promptpath.probes.prefill.verdict import PROBE, CacheSample, Sample, judge

#: Output tokens each probe request asks for: the first one is what is measured.
OUTPUT_TOKENS = 16
#: The longest prompt is sent this many more times, its whole prefix seen before.
CACHE_REPEATS = 2


def _input_tokens(tl: Timeline, prompt: str) -> tuple[int, bool, int | None]:
    """The request's input tokens as its usage reports them (with the cached ones where
    the API counts them apart), else estimated; whether estimated; the cached count."""
    usage = reported_usage(tl)
    if usage is None or usage.input_tokens is None:
        return estimate_tokens(prompt), True, None
    cached = usage.cached_input_tokens
    # Anthropic, Bedrock: the cache's reads and writes are counted outside input_tokens.
    apart = (cached or 0) + (usage.cache_write_input_tokens or 0) if usage.cached_apart else 0
    total = usage.input_tokens + apart
    return total, False, cached


def _adjusted(tl: Timeline) -> tuple[float | None, float | None]:
    """TTFT from the request less one round trip, and that round trip; through a proxy
    (or with no RTT read) the unadjusted TTFT from the request and None."""
    metrics = compute(tl)
    if metrics.ttft_network_adjusted_ms is not None:
        return metrics.ttft_network_adjusted_ms, metrics.rtt_ms
    return metrics.ttft_from_request_ms, None


@register
class PrefillProbe(Probe):
    name = PROBE
    description = (
        "where TTFT goes: wire, fixed part (queue) and prefill; is the prefix cache working?"
    )

    def cost(self, ctx: ProbeContext) -> Cost:
        sizes = ctx.settings.prefill.values()
        repeats = ctx.settings.prefill.repeats
        requests = len(sizes) * repeats + CACHE_REPEATS
        inputs = sum(sizes) * repeats + CACHE_REPEATS * max(sizes)
        out = min(ctx.options.max_tokens, OUTPUT_TOKENS)
        return Cost(
            requests=requests,
            tokens=inputs + requests * out,
            seconds=requests * ctx.options.timeout,
        )

    async def run(self, ctx: ProbeContext) -> Finding:
        from promptpath.tracer.orchestrator import trace

        sizes = ctx.settings.prefill.values()
        repeats = ctx.settings.prefill.repeats
        out = min(ctx.options.max_tokens, OUTPUT_TOKENS)
        samples: list[Sample] = []
        failures: list[str] = []
        proxied = False
        longest: str | None = None
        total = len(sizes) * repeats + CACHE_REPEATS
        done = 0

        async def send(prompt: str) -> Timeline | None:
            nonlocal done, proxied
            done += 1
            ctx.progress(f"prefill: request {done} of {total}")
            # One cold request each (no --warm second one: it would double the input tokens);
            # the prefix before the question marked for caching where the API wants a mark.
            opts: RunOptions = dataclasses.replace(
                ctx.options,
                prompt=prompt,
                max_tokens=out,
                warm=False,
                cache_prefix=cache_prefix(prompt),
            )
            result = await trace(opts)
            tl = result.timeline
            if tl.error is not None or "ttft" not in tl.milestones:
                failures.append(tl.error.message if tl.error is not None else "no first token")
                return None
            proxied = proxied or (tl.rtt is not None and tl.rtt.hop == "proxy")
            return tl

        for r in range(repeats):
            # Interleaved, each round in a rotated order: a drift over the run (a queue
            # filling, a cache warming) lands on every size alike, not on one.
            order = sizes[r % len(sizes) :] + sizes[: r % len(sizes)]
            for size in order:
                prompt = prompt_of(size)
                if size == sizes[-1] and longest is None:
                    longest = prompt
                tl = await send(prompt)
                if tl is None:
                    continue
                adjusted, rtt = _adjusted(tl)
                if adjusted is None:
                    continue
                tokens, estimated, _ = _input_tokens(tl, prompt)
                samples.append(
                    Sample(
                        size=size,
                        input_tokens=tokens,
                        estimated=estimated,
                        adjusted_ms=adjusted,
                        rtt_ms=rtt,
                    )
                )
        cache: list[CacheSample] = []
        for _ in range(CACHE_REPEATS if longest is not None else 0):
            assert longest is not None
            tl = await send(longest)
            if tl is None:
                continue
            adjusted, _rtt = _adjusted(tl)
            if adjusted is None:
                continue
            tokens, _estimated, cached = _input_tokens(tl, longest)
            cache.append(
                CacheSample(input_tokens=tokens, cached_tokens=cached, adjusted_ms=adjusted)
            )
        if not samples and failures:
            return Finding(
                probe=PROBE,
                verdict=Verdict.ERROR,
                summary=f"no request of the probe gave a first token: {failures[0]}",
                evidence={"failures": failures[:5]},
            )
        note = (
            "through a forward proxy: the round trip read is the proxy's hop, so TTFT is"
            " not adjusted (the fixed part holds the path beyond it)"
            if proxied
            else None
        )
        finding = judge(
            samples,
            cache,
            repeats=repeats,
            rtt_note=note,
            cache_mark=dialect(ctx.options.provider).cache_mark,
        )
        if failures:
            evidence = dict(finding.evidence, failures=failures[:5], failed=len(failures))
            finding = dataclasses.replace(finding, evidence=evidence)
        return finding
