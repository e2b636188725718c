"""The ``ratelimit`` probe: how much of each rate limit is left, and who answered a 429.

It sends nothing: the traced request's own response headers (OpenAI's, Anthropic's, the
IETF fields, Retry-After) are read by the pure verdict in ``ratelimit.verdict``.
"""

from __future__ import annotations

from promptpath.core.findings import Finding, Verdict
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.ratelimit.verdict import PROBE, judge


@register
class RateLimitProbe(Probe):
    name = PROBE
    description = "how much of each rate limit is left; on a 429, the edge or the application?"

    def cost(self, ctx: ProbeContext) -> Cost:
        return Cost()  # reads the trace's response headers only

    async def run(self, ctx: ProbeContext) -> Finding:
        result = ctx.result
        if result is None or result.timeline.status is None:
            return Finding(
                probe=PROBE,
                verdict=Verdict.SKIP,
                summary="no response came back: no headers to read rate limits from",
            )
        tl = result.timeline
        return judge(tl.response_headers, tl.status, tl.t0_unix_ns / 1e9)
